"""The package's ``.npy`` readers, this tree against another version of the package, side by side.

What compare's golden side (``compare._golden.load_golden``, with and without its read buffer),
the capture's reader (``formats.npy.read_npy``) and ``verify``'s input check
(``bundle._input_files._read_header``) cost per small file: the header parse is most of it,
so a change to the header reader shows here first (bench_compare.py shows it diluted in a whole
compare and needs msaccucmp's venv).

    .venv/bin/python benchmarks/bench_npy_header.py --baseline /tmp/base   # a copy of the old package
    (e.g. mkdir /tmp/base && git archive HEAD~3 npu_dump_hook | tar -x -C /tmp/base)

Files: ``--files`` small ``np.save`` files of a few shapes (float32/float16/int64, 0-d to 3-d,
most under 4 KiB), written once into a temporary folder. Both versions are imported into this one
process (the baseline's modules first, then put aside, then this tree's), and every reader of each
version reads every file once per round, the two versions alternating (and which goes first),
``--rounds`` rounds after one warm-up round: on a shared, loaded machine that is far steadier than
separate processes. Printed: the medians over the rounds of CPU (``process_time``) and wall seconds
per reader and version, the ratio current/baseline (below 1: faster), and the load average before
and after.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time


def _readers(tree):
    """The four readers of the package in ``tree``, imported fresh (the modules are then put aside)."""
    for name in [n for n in sys.modules if n == "npu_dump_hook" or n.startswith("npu_dump_hook.")]:
        del sys.modules[name]
    sys.path.insert(0, tree)
    try:
        from npu_dump_hook.bundle._input_files import _read_header
        from npu_dump_hook.compare._golden import load_golden
        from npu_dump_hook.formats.npy import read_npy
    finally:
        sys.path.remove(tree)
    buffer = bytearray(1 << 16)

    def verify_header(path):
        with open(path, "rb") as handle:
            return _read_header(handle)

    return {"load_golden": load_golden, "load_golden+buffer": lambda path: load_golden(path, buffer),
            "read_npy": read_npy, "verify_header": verify_header}


def _write_files(folder, count):
    import numpy as np

    shapes = [((16, 32), np.float32), ((4,), np.float32), ((), np.float32), ((8, 8, 3), np.float16),
              ((64,), np.int64), ((2, 5), np.float32), ((128, 4), np.float16)]
    rng = np.random.RandomState(0)
    for number in range(count):
        shape, dtype = shapes[number % len(shapes)]
        np.save(os.path.join(folder, "op_{:05d}.0.{}.npy".format(number, 1700000000000000 + number)),
                rng.standard_normal(shape).astype(dtype))


def _timed(read, paths):
    cpu, wall = time.process_time(), time.perf_counter()
    for path in paths:
        read(path)
    return time.process_time() - cpu, time.perf_counter() - wall


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="folder holding the other version's npu_dump_hook/")
    parser.add_argument("--current", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    print("load before:", " ".join("{:.2f}".format(v) for v in os.getloadavg()))
    sides = {"baseline": _readers(os.path.abspath(args.baseline)), "current": _readers(os.path.abspath(args.current))}
    times = {(side, name): [] for side in sides for name in sides[side]}
    with tempfile.TemporaryDirectory(prefix="bench_npy_") as folder:
        _write_files(folder, args.files)
        paths = sorted(os.path.join(folder, name) for name in os.listdir(folder))
        for round_number in range(args.rounds + 1):
            order = ("baseline", "current") if round_number % 2 else ("current", "baseline")
            for name in sides["current"]:
                for side in order:
                    spent = _timed(sides[side][name], paths)
                    if round_number:  # round 0 warms caches up
                        times[(side, name)].append(spent)
    print("medians over {} alternating rounds of {} files:".format(args.rounds, args.files))
    for name in sides["current"]:
        med = {side: [statistics.median(t[k] for t in times[(side, name)]) for k in (0, 1)] for side in sides}
        print("  {:20s} baseline cpu {:.4f} s wall {:.4f} s | current cpu {:.4f} s wall {:.4f} s | "
              "current/baseline cpu {:.2f} wall {:.2f} | current {:.1f} us/file cpu".format(
                  name, med["baseline"][0], med["baseline"][1], med["current"][0], med["current"][1],
                  med["current"][0] / med["baseline"][0], med["current"][1] / med["baseline"][1],
                  med["current"][0] / args.files * 1e6))
    print("load after:", " ".join("{:.2f}".format(v) for v in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
