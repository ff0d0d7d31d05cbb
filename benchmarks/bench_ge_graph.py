"""Benchmark: ge_graph scanner vs google.protobuf.text_format.Parse on one synthetic Build graph.

Builds a Build-graph text file (default 50 MB+, ``--quick`` 5 MB) of realistic ops — fused
convolutions and matmuls with ``_datadump_original_op_names``, TransData/Cast without an
origin, ``_no_task`` Data/Const ops, every input/output desc carrying the attrs GE's
serializer adds plus the data-dump origin attrs — in a temp dir, then times in one run:

* ``iter_graphs`` (our streaming scanner, fast path) over the file;
* ``text_format.Parse`` of the same file into the full ``ge.proto.ModelDef``;

and prints MB/s, the ratio and whether the targets (>= 20x faster than text_format.Parse,
>= 100 MB/s) are met. Exit code 1 if a target is missed.

    .venv/bin/python benchmarks/bench_ge_graph.py [--quick] [--mb N] [--repeat N]
"""
import argparse
import os
import sys
import tempfile
import time

from google.protobuf import text_format

from npu_dump_hook.formats import ge_graph, ge_ir_schema

TARGET_RATIO = 20.0
TARGET_MBPS = 100.0


def _desc(dtype, shape, layout, origin_name=None, index=0, origin_shape=None):
    return ge_graph.make_tensor_desc(
        dtype, shape, layout, origin_format="NHWC" if layout == "NC1HWC0" else layout,
        origin_shape=origin_shape, origin_dtype="DT_FLOAT", origin_name=origin_name,
        origin_output_index=index, size=4096,
        attrs={"_tensor_memory_scope": 0, "_fusion_offset": 1, "_is_from_const_op": False})


def _common_attrs(kernel):
    return {"_fe_imply_type": 6, "tvm_blockdim": 32, "_kernelname": kernel + "__kernel0",
            "_is_n_batch_split": False, "op_para_size": 128, "_op_slice_info": '{"x":1}',
            "_datadump_is_multiop": False, "_input_name_key": ["x", "filter", "bias"],
            "_input_name_value": [0, 1, 2], "_unknown_shape_type": 0,
            "_soc_version": "Ascend910B", "data_format": "NHWC", "alpha": 0.2,
            "_datadump_original_op_types": ["Conv2D", "BiasAdd", "Relu"]}


def _template_ops():
    """A dozen op kinds; "@" in names is replaced by the layer index."""
    nc = [8, 4, 28, 28, 16]
    conv_in = _desc("DT_FLOAT16", nc, "NC1HWC0", "net/@/input", 0, [8, 28, 28, 64])
    conv_out = _desc("DT_FLOAT16", nc, "NC1HWC0", "net/@/Relu", 0, [8, 28, 28, 64])
    plain = _desc("DT_FLOAT", [8, 28, 28, 64], "NHWC")
    return [
        ge_graph.make_op("net/@/conv/Conv2D", "Conv2D", 1,
                         ["net/@/input:0", "net/@/w:0", "net/@/b:0", "net/@/dep:-1"],
                         [conv_in, conv_in, conv_in], [conv_out],
                         original_op_names=["net/@/conv/Conv2D", "net/@/BiasAdd", "net/@/Relu"],
                         attrs=_common_attrs("te_conv2d_@")),
        ge_graph.make_op("trans_TransData_@", "TransData", 1, ["net/@/conv/Conv2D:0"],
                         [conv_out], [plain], original_op_names=[""],
                         attrs={"_fe_imply_type": 6, "src_format": "NC1HWC0",
                                "dst_format": "NHWC"}),
        ge_graph.make_op("net/@/Cast", "Cast", 1, ["trans_TransData_@:0"], [plain],
                         [_desc("DT_FLOAT16", [8, 28, 28, 64], "NHWC", "net/@/Cast", 0)],
                         attrs=_common_attrs("te_cast_@")),
        ge_graph.make_op("net/@/MatMul", "MatMulV2", 1, ["net/@/Cast:0", "net/@/w2:0"],
                         [plain, plain],
                         [_desc("DT_FLOAT16", [4, 4, 16, 16], "FRACTAL_NZ", "net/@/MatMul",
                                0, [64, 64]),
                          _desc("DT_FLOAT", [64], "ND", "net/@/MatMul", 1)],
                         original_op_names=["net/@/MatMul", "net/@/Add"],
                         attrs=_common_attrs("te_matmul_@")),
        ge_graph.make_op("net/@/w", "Const", 1, [], [], [plain], no_task=True,
                         attrs={"_output_tensor_name": "w"}),
        ge_graph.make_op("net/@/input", "Data", 1, [], [plain], [plain], no_task=True,
                         attrs={"index": 0}),
    ]


def build_file(path, target_bytes):
    """Write a one-graph Build file of at least ``target_bytes``; return (size, op count)."""
    templates = ge_graph.format_model(ge_graph.make_model([("g", _template_ops())]))
    body = templates[templates.index("  op {\n"):templates.rindex("}")]
    ops = body.split("  op {\n")[1:]
    chunk = "".join("  op {\n" + op for op in ops)
    count = 0
    with open(path, "w", encoding="ascii", newline="\n") as handle:
        handle.write('graph {\n  name: "ge_default_20240613143502_1"\n')
        written = 0
        layer = 0
        while written < target_bytes:
            text = chunk.replace("@", "layer{}".format(layer)).replace(
                "    id: 1\n", "    id: {}\n".format(layer + 1))
            handle.write(text)
            written += len(text)
            count += len(ops)
            layer += 1
        handle.write("}\n")
    return os.path.getsize(path), count


def _best(fn, repeat):
    best = None
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return best, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 MB instead of 50 MB")
    parser.add_argument("--mb", type=float, default=None, help="file size in MB")
    parser.add_argument("--repeat", type=int, default=3, help="scanner runs (best is kept)")
    args = parser.parse_args(argv)
    megabytes = args.mb or (5.0 if args.quick else 52.0)
    with tempfile.TemporaryDirectory(prefix="bench_ge_graph_") as tmp:
        path = os.path.join(tmp, "ge_proto_00000123_graph_1_Build.txt")
        size, n_ops = build_file(path, int(megabytes * 1e6))
        mb = size / 1e6
        print("file: {:.1f} MB, {} ops".format(mb, n_ops))

        scan_s, graphs = _best(lambda: ge_graph.scan_graph(path), args.repeat)
        assert sum(len(g.ops) for g in graphs) == n_ops

        def full_parse():
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            model = ge_ir_schema.ModelDef()
            text_format.Parse(text, model)
            return model

        parse_s, model = _best(full_parse, 1)
        assert len(model.graph[0].op) == n_ops

    scan_mbps, parse_mbps = mb / scan_s, mb / parse_s
    ratio = parse_s / scan_s
    print("scanner (iter_graphs):  {:7.3f} s  {:8.1f} MB/s".format(scan_s, scan_mbps))
    print("text_format.Parse:      {:7.3f} s  {:8.1f} MB/s".format(parse_s, parse_mbps))
    ok_ratio, ok_speed = ratio >= TARGET_RATIO, scan_mbps >= TARGET_MBPS
    print("ratio: {:.1f}x (target >= {:.0f}x: {})".format(
        ratio, TARGET_RATIO, "met" if ok_ratio else "MISSED"))
    print("scanner throughput: {:.1f} MB/s (target >= {:.0f} MB/s: {})".format(
        scan_mbps, TARGET_MBPS, "met" if ok_speed else "MISSED"))
    return 0 if ok_ratio and ok_speed else 1


if __name__ == "__main__":
    sys.exit(main())
