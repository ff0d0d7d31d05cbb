"""Opening a large bundle (``bundle.open_bundle``), this tree against another version of the package.

What opening a bundle folder costs when bundle.json lists many files: reading and parsing
bundle.json, the type checks and (since the open refuses a document naming a path outside the
bundle) the check of every path it lists, strings only. The paths' check must stay negligible
next to the parse.

    .venv/bin/python benchmarks/bench_open_bundle.py --baseline /tmp/base   # a copy of the old package
    (e.g. mkdir /tmp/base && git archive HEAD~1 npu_dump_hook | tar -x -C /tmp/base)

The bundle: a folder whose ``data/bundle.json`` lists ``--files`` dump entries (the fields the
writer records; no payload is needed, the open reads bundle.json and the manifest up to its row)
and a manifest-sha256.txt listing them (``--row-last``: bundle.json's row last), written once into a
temporary folder. Both versions are imported into this one process (the baseline's modules first,
then put aside, then this tree's) and open it ``--opens`` times per round, the two alternating
(and which goes first), ``--rounds`` rounds after one warm-up round. Printed: the medians over
the rounds of CPU (``process_time``) and wall seconds per open and version, the ratio
current/baseline (below 1: faster), and the load average before and after.
"""
import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time


def _opener(tree):
    """``open_bundle`` of the package in ``tree``, imported fresh (the modules are then put aside)."""
    for name in [n for n in sys.modules if n == "npu_dump_hook" or n.startswith("npu_dump_hook.")]:
        del sys.modules[name]
    sys.path.insert(0, tree)
    try:
        from npu_dump_hook.bundle import open_bundle
    finally:
        sys.path.remove(tree)

    def open_and_close(path):
        open_bundle(path, parts=()).close()

    return open_and_close


def _write_manifest(root, entries, row_last):
    """manifest-sha256.txt as the writer writes it (one row per payload file, sorted by path, so
    bundle.json's row is the first), or with bundle.json's row last (``--row-last``: a hand-made,
    unsorted bag, where the open streams every row)."""
    with open(os.path.join(root, "data", "bundle.json"), "rb") as handle:
        own = "{}  data/bundle.json\n".format(hashlib.sha256(handle.read()).hexdigest())
    rows = ["{}  data/{}\n".format(entry["sha256"], entry["path"]) for entry in entries]
    with open(os.path.join(root, "manifest-sha256.txt"), "w") as handle:
        handle.write("".join(rows + [own]) if row_last else "".join([own] + rows))


def _write_bundle(root, count, row_last=False):
    entries = []
    for number in range(count):
        name = "Conv2D.block_{0}/conv{0}/Conv2D.{0}.2.{1}".format(number, 1700000000000000 + number)
        entries.append({"path": "dump/20240101000000/0/ge_default_1/1/0/" + name, "kind": "dump", "size": 4096,
                        "sha256": "{:064x}".format(number), "op_type": "Conv2D", "op_name": "block_{0}/conv{0}/Conv2D"
                        .format(number), "task_id": number, "stream_id": 2, "timestamp": 1700000000000000 + number,
                        "header": {"inputs": 2, "outputs": 1}})
    doc = {"schema": "npu_dump_hook/bundle@1", "backend": "emulated", "created": "2024-01-01T00:00:00Z",
           "graph": {"file": "graph/ge_proto_00000001_Build.txt", "name": "ge_default_1", "stage": "Build",
                     "op_count": count}, "files": entries, "warnings": []}
    os.makedirs(os.path.join(root, "data"))
    with open(os.path.join(root, "data", "bundle.json"), "w") as handle:
        json.dump(doc, handle)
    _write_manifest(root, entries, row_last)
    return os.path.getsize(os.path.join(root, "data", "bundle.json"))


def _time(open_and_close, path, opens):
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(opens):
        open_and_close(path)
    return (time.process_time() - cpu) / opens, (time.perf_counter() - wall) / opens


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="a folder holding the other version's npu_dump_hook/")
    parser.add_argument("--files", type=int, default=50000)
    parser.add_argument("--opens", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--row-last", action="store_true",
                        help="bundle.json's manifest row last (an unsorted manifest: read to its end)")
    args = parser.parse_args(argv)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    versions = {"baseline": _opener(os.path.abspath(args.baseline)), "current": _opener(here)}
    print("load before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory(prefix="bench_open_bundle-") as tmp:
        path = os.path.join(tmp, "b")
        size = _write_bundle(path, args.files, args.row_last)
        print("bundle.json: {} files[] entries, {:.1f} MB; manifest {:.1f} MB, bundle.json's row {}".format(
            args.files, size / 1e6, os.path.getsize(os.path.join(path, "manifest-sha256.txt")) / 1e6,
            "last" if args.row_last else "first (as written)"))
        times = {name: [] for name in versions}
        order = list(versions)
        for number in range(args.rounds + 1):
            for name in order:
                measured = _time(versions[name], path, args.opens)
                if number:  # round 0 warms up
                    times[name].append(measured)
            order.reverse()
    medians = {name: (statistics.median(c for c, _w in runs), statistics.median(w for _c, w in runs))
               for name, runs in times.items()}
    for name, (cpu, wall) in medians.items():
        print("{:9s} per open: cpu {:.4f} s  wall {:.4f} s".format(name, cpu, wall))
    print("ratio current/baseline: cpu {:.3f}  wall {:.3f}".format(
        medians["current"][0] / medians["baseline"][0], medians["current"][1] / medians["baseline"][1]))
    print("load after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
