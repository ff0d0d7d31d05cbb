"""Benchmark: dump-file header parsing and payload -> numpy throughput.

1. Header-only parse of N dump files (default 10,000) with ``read_header`` (reads
   8 bytes + header), against the naive way: read the whole file and decode the
   header with protobuf. Prints files/s and the ratio.
2. Payload to numpy for one large output tensor (default 256 MiB float32):
   ``DumpFile.array(copy=True)`` (reads into fresh memory) and ``DumpFile.array()``
   (memory map, then copied so every page is touched) against
   ``numpy.fromfile(path, dtype, count, offset)`` on the same bytes.
   Target: at least 0.8x of numpy.fromfile. Best of several warm-cache runs.

Usage: python benchmarks/bench_dump_file.py [--quick] [--files N] [--payload-mib M]
"""
import argparse
import os
import struct
import sys
import tempfile
import time

import numpy as np

from npu_dump_hook.formats import dump_schema
from npu_dump_hook.formats.dump_file import DumpFile, DumpTensor, read_header, write_dump_file

TARGET = 0.8


def _best(func, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def _make_files(folder, count):
    rng = np.random.default_rng(0)
    device = rng.standard_normal((1, 1, 8, 8, 16)).astype(np.float16)  # 2 KiB NC1HWC0
    paths = []
    for i in range(count):
        path = os.path.join(folder, "Conv2D.net_layer{0}_conv.{0}.3.17000000{0:08d}".format(i))
        write_dump_file(
            path, "net/layer{}/conv".format(i), dump_time=1700000000000000 + i,
            inputs=[DumpTensor(device, format="NC1HWC0", original_shape=[1, 8, 8, 3], original_format="NHWC"),
                    DumpTensor(np.zeros((9, 1, 16, 16), np.float16), format="FRACTAL_Z",
                               original_shape=[3, 3, 3, 16], original_format="HWCN")],
            outputs=[DumpTensor(device, format="NC1HWC0", original_shape=[1, 8, 8, 16],
                                original_name="net/layer{}/conv".format(i), original_format="NHWC")],
        )
        paths.append(path)
    return paths


def _naive_header(path):
    with open(path, "rb") as fileobj:
        data = fileobj.read()
    (length,) = struct.unpack_from("<Q", data)
    header = dump_schema.DumpData()
    header.ParseFromString(data[8:8 + length])
    return header


def bench_headers(folder, count):
    paths = _make_files(folder, count)
    for path in paths[:100]:  # warm the page cache path lookups
        read_header(path)
    ours = _best(lambda: [read_header(p) for p in paths], 3)
    naive = _best(lambda: [_naive_header(p) for p in paths], 3)
    print("header-only parse of {} files:".format(count))
    print("  read_header (validated, 8 B + header)  {:10.0f} files/s".format(count / ours))
    print("  whole file read + protobuf decode        {:10.0f} files/s".format(count / naive))
    print("  ratio ours / naive                       {:10.2f}x".format(naive / ours))


def bench_payload(folder, mib):
    path = os.path.join(folder, "big")
    count = mib * (1 << 20) // 4
    write_dump_file(path, "big", outputs=[np.arange(count, dtype=np.float32)], dump_time=1)
    with DumpFile.open(path) as dump:
        offset = dump.outputs[0].offset

    def fromfile():
        return np.fromfile(path, dtype="<f4", count=count, offset=offset)

    def ours_copy():
        with DumpFile.open(path) as dump:
            return dump.array("output", 0, copy=True)

    def ours_mmap():
        with DumpFile.open(path) as dump:
            return np.array(dump.array("output", 0))  # touch every page

    assert np.array_equal(ours_copy(), fromfile()) and np.array_equal(ours_mmap(), fromfile())
    base = _best(fromfile, 5)
    copy_t = _best(ours_copy, 5)
    mmap_t = _best(ours_mmap, 5)
    mb = count * 4 / 1e6
    print("payload -> numpy, {} MiB float32:".format(mib))
    print("  numpy.fromfile              {:8.0f} MB/s".format(mb / base))
    print("  DumpFile.array(copy=True)   {:8.0f} MB/s  ratio {:.2f}x".format(mb / copy_t, base / copy_t))
    print("  DumpFile.array() mmap+copy  {:8.0f} MB/s  ratio {:.2f}x".format(mb / mmap_t, base / mmap_t))
    ratio = base / copy_t
    print("  target >= {:.1f}x of numpy.fromfile (copy=True): {}".format(TARGET, "MET" if ratio >= TARGET else "NOT MET"))
    return ratio >= TARGET


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 files and a 32 MiB payload")
    parser.add_argument("--files", type=int, default=None)
    parser.add_argument("--payload-mib", type=int, default=None)
    args = parser.parse_args(argv)
    files = args.files or (1000 if args.quick else 10000)
    mib = args.payload_mib or (32 if args.quick else 256)
    with tempfile.TemporaryDirectory(prefix="bench_dump_file_") as folder:
        bench_headers(folder, files)
        met = bench_payload(folder, mib)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
