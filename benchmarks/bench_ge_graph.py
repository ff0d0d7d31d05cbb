"""Benchmark: the ge_graph scanner vs google.protobuf.text_format.Parse on a Build graph.

Writes, in a temp dir, a one-graph Build file (default 60 MB, ~39k ops; ``--quick`` 5 MB)
of realistic ops: fused convolutions and matmuls with ``_datadump_original_op_names`` and
a JSON ``_op_slice_info`` (escaped quotes), TransData/Cast without an origin, ``_no_task``
Data/Const ops, and many small element-wise ops; every desc carries the attrs GE's
serializer adds plus the data-dump origin attrs. Tensor ranks and some optional attrs vary
with the layer, so the file holds a few hundred different op layouts. Then it times:

* ``npu-dump-hook parse FILE --json`` run in-process (``cli.main``: it counts the ops of each
  graph with ``iter_graph_counts`` on every core, forked workers sharing the file), and the
  whole command in a new interpreter (start-up and imports included, for reference);
* the scan graph selection and collect run (``iter_graphs``, one process) and the same with
  every core (``workers=``), and the op count in one process;
* ``text_format.Parse`` of the first ``--parse-mb`` MB of the same ops into the full
  ``ge.proto.ModelDef`` (it runs at about 1 MB/s: the whole file would take a minute);
* the scan of non-canonical variants of the same graph, at 1/4 and at full size, to show
  that the time is linear: trailing blanks on every closing line, CRLF line ends, and (the
  ops the fast path declines: read by the tokenizer, ~2 MB/s, so at ``--declined-mb``)
  a comment after every op's closing brace.

It prints MB/s for each and for text_format.Parse side by side with the ratio, and whether
the targets are met: ``parse`` >= 200 MB/s (issue 11); the one-process scan >= 100 MB/s and
>= 20x text_format.Parse. It runs in the interpreter that starts it; ``--python PATH`` (repeatable)
also runs the timings in other interpreters on the same files and prints one row each:

    .venv/bin/python benchmarks/bench_ge_graph.py --python /tmp/v115/bin/python

Exit code 1 if a target is missed by any interpreter.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

TARGET_MBPS = 100.0
PARSE_TARGET_MBPS = 200.0
TARGET_RATIO = 20.0
CANONICAL = "ge_proto_00000123_graph_1_Build.txt"
VARIANTS = (  # (file, what, scanned at 1/4 and full size by default)
    ("blanks.txt", "trailing blanks on every closing line"),
    ("crlf.txt", "CRLF line ends"),
    ("declined.txt", "a comment after every op's closing brace (tokenizer)"),
)


# --------------------------------------------------------------------------- the graph

def _layer_ops(rank, extra):
    """The ops of one layer, "@" standing for the layer name; ``rank`` of its tensors,
    ``extra`` adds optional attrs (fusion scope, an int list)."""
    from npu_dump_hook.formats import ge_graph

    dims = [8, 16, 28, 28, 64][:rank]
    five_d = [8, 4, 28, 28, 16]

    def desc(dtype, shape, layout, origin=None, index=0):
        return ge_graph.make_tensor_desc(
            dtype, shape, layout, origin_format="NHWC" if layout == "NC1HWC0" else layout,
            origin_shape=dims, origin_dtype="DT_FLOAT", origin_name=origin,
            origin_output_index=index, size=4096, attrs={"_tensor_memory_scope": 0})

    def attrs(kernel, **more):
        found = {"_fe_imply_type": 6, "tvm_blockdim": 32, "_kernelname": kernel + "__kernel0",
                 "_op_slice_info": '{"splitMaps": [{"inputList": [{"idx": 0, "axis": [0]}]}]}',
                 "_soc_version": "Ascend910B", "_is_n_batch_split": False}
        if extra:
            found.update({"_fusion_scope": "@/scope", "_input_name_value": [0, 1, 2]})
        found.update(more)
        return found

    plain = desc("DT_FLOAT", dims, "ND")
    ops = [
        ge_graph.make_op("@/conv/Conv2D", "Conv2D", 1, ["@/input:0", "@/w:0", "@/b:0", "@/dep:-1"],
                         [desc("DT_FLOAT16", five_d, "NC1HWC0", "@/input")] * 3,
                         [desc("DT_FLOAT16", five_d, "NC1HWC0", "@/Relu")],
                         original_op_names=["@/conv/Conv2D", "@/BiasAdd", "@/Relu"],
                         attrs=attrs("te_conv2d_@", alpha=0.2, data_format="NHWC")),
        ge_graph.make_op("@/trans_TransData", "TransData", 1, ["@/conv/Conv2D:0"], [plain],
                         [plain], original_op_names=[""],
                         attrs={"src_format": "NC1HWC0", "dst_format": "NHWC"}),
        ge_graph.make_op("@/MatMul", "MatMulV2", 1, ["@/Cast:0", "@/w2:0"], [plain, plain],
                         [desc("DT_FLOAT16", [4, 4, 16, 16], "FRACTAL_NZ", "@/MatMul"),
                          desc("DT_FLOAT", [64], "ND", "@/MatMul", 1)],
                         original_op_names=["@/MatMul", "@/Add"], attrs=attrs("te_matmul_@")),
        ge_graph.make_op("@/w", "Const", 1, [], [], [plain], no_task=True),
        ge_graph.make_op("@/input", "Data", 1, [], [], [plain], no_task=True,
                         attrs={"index": 0}),
    ]
    small = ["Add", "Mul", "Relu", "Cast", "Sub", "RealDiv", "Square"]
    for index in range(44):
        name = "@/op_{}".format(index)
        if index % 3 == 0:  # variable reads, identities: no task, no origin
            ops.append(ge_graph.make_op(name, "Identity", 1, ["@/v{}:0".format(index)], [],
                                        [ge_graph.make_tensor_desc("DT_FLOAT", dims, "ND")],
                                        no_task=True))
            continue
        inputs = ["@/x{}:0".format(index)] + (["@/y:0"] if index % 2 else [])
        out = ge_graph.make_tensor_desc("DT_FLOAT", dims, "ND", origin_name=name,
                                        origin_output_index=0)
        ops.append(ge_graph.make_op(name, small[index % len(small)], 1, inputs, [], [out],
                                    attrs={"_fe_imply_type": 6}))
    return ops


def build_file(path, target_bytes, variants=10):
    """Write a canonical one-graph Build file of at least ``target_bytes``; (size, op count).
    Layer i uses layout variant i % ``variants`` (ranks 1-5, with or without extras)."""
    from npu_dump_hook.formats import ge_graph

    chunks = []
    for variant in range(variants):
        text = ge_graph.format_model(ge_graph.make_model(
            [("g", _layer_ops(1 + variant % 5, variant >= 5))]))
        chunks.append(text[text.index("  op {\n"):text.rindex("}")].split("    id: 1\n"))
    count = 0
    with open(path, "w", encoding="ascii", newline="\n") as handle:
        handle.write('graph {\n  name: "ge_default_20240613143502_1"\n')
        written = layer = 0
        while written < target_bytes:
            pieces = chunks[layer % variants]
            out = [pieces[0]]
            for piece in pieces[1:]:
                count += 1
                out.append("    id: {}\n".format(count))
                out.append(piece)
            text = "".join(out).replace("@", "net/layer{}".format(layer))
            handle.write(text)
            written += len(text)
            layer += 1
        handle.write("}\n")
    return os.path.getsize(path), count


def write_variants(folder, canonical, declined_bytes):
    """The non-canonical copies of ``canonical`` in ``folder``, each also cut to 1/4."""
    with open(canonical, "rb") as handle:
        data = handle.read()
    made = {
        "blanks.txt": re.sub(rb"(?m)^( *)\}$", rb"\g<0> \t", data),
        "crlf.txt": data.replace(b"\n", b"\r\n"),
        "declined.txt": _graph_prefix(data, declined_bytes).replace(b"\n  }\n", b"\n  } # op\n"),
    }
    for name, text in made.items():
        with open(os.path.join(folder, name), "wb") as handle:
            handle.write(text)
        with open(os.path.join(folder, "quarter_" + name), "wb") as handle:
            handle.write(_graph_prefix(text, len(text) // 4))


def _graph_prefix(data, size):
    """The graph cut after the last op that ends within ``size`` bytes."""
    line = b"\r\n  op {" if b"\r\n" in data[:200] else b"\n  op {"
    cut = data.rfind(line, 0, max(size, data.index(line) + 1))
    cut = data.index(line, data.index(line) + 1) if cut <= data.index(line) else cut
    end = b"\r\n}\r\n" if line.startswith(b"\r") else b"\n}\n"
    return data[:cut] + end


# --------------------------------------------------------------------------- timings

def _best(fn, repeat):
    best = result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return best, result


def _scan_ops(path):
    from npu_dump_hook.formats import ge_graph

    return sum(len(graph.ops) for graph in ge_graph.iter_graphs(path))


def _parse_in_process(path):
    """``npu-dump-hook parse --json PATH`` through cli.main, its JSON kept from the terminal."""
    import contextlib
    import io

    from npu_dump_hook.cli import main as cli_main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(["parse", "--json", path])
    assert code == 0, "parse failed"
    return sum(graph["op_count"] for graph in json.loads(out.getvalue())["files"][0]["graphs"])


def _parse_command(path):
    """The same as a new process (interpreter start-up and imports included)."""
    out = subprocess.run([sys.executable, "-c", "import sys; from npu_dump_hook.cli import main; "
                          "sys.exit(main(sys.argv[1:]))", "parse", "--json", path],
                         stdout=subprocess.PIPE, check=True).stdout
    return sum(graph["op_count"] for graph in json.loads(out.decode())["files"][0]["graphs"])


def time_all(folder, repeat, parse_bytes):
    """Timings (seconds, sizes in bytes) of everything in ``folder``, in this interpreter."""
    from google.protobuf import text_format
    from google.protobuf.internal import api_implementation

    from npu_dump_hook.formats import ge_ir_schema as ge_schema

    canonical = os.path.join(folder, CANONICAL)
    result = {"python": sys.version.split()[0], "protobuf": api_implementation.Type(),
              "size": os.path.getsize(canonical)}
    from npu_dump_hook.formats import ge_graph
    from npu_dump_hook._forked import usable_cores

    cores = usable_cores()
    result["cores"] = cores
    result["parse_cli_s"], parse_ops = _best(lambda: _parse_in_process(canonical), repeat)
    result["parse_command_s"], command_ops = _best(lambda: _parse_command(canonical), repeat)
    result["scan_s"], result["ops"] = _best(lambda: _scan_ops(canonical), repeat)
    result["scan_workers_s"], worker_ops = _best(lambda: sum(
        len(g.ops) for g in ge_graph.iter_graphs(canonical, workers=cores)), repeat)
    result["count_s"], count_ops = _best(lambda: sum(
        g.op_count for g in ge_graph.iter_graph_counts(canonical)), repeat)
    assert parse_ops == command_ops == worker_ops == count_ops == result["ops"], "op counts differ"

    with open(canonical, "rb") as handle:
        text = _graph_prefix(handle.read(), parse_bytes).decode("utf-8")

    def full_parse():
        model = ge_schema.ModelDef()
        text_format.Parse(text, model)
        return len(model.graph[0].op)

    result["parse_size"] = len(text)
    result["parse_s"], parsed_ops = _best(full_parse, 1)
    prefix = os.path.join(folder, "parsed_prefix.txt")
    with open(prefix, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    assert _scan_ops(prefix) == parsed_ops, "scanner and text_format.Parse disagree"
    result["variants"] = []
    for name, what in VARIANTS:
        row = {"what": what}
        for key, file_name in (("quarter", "quarter_" + name), ("full", name)):
            path = os.path.join(folder, file_name)
            seconds, ops = _best(lambda: _scan_ops(path), 1 if name == "declined.txt" else 2)
            row[key] = {"size": os.path.getsize(path), "s": seconds, "ops": ops}
        result["variants"].append(row)
    return result


# --------------------------------------------------------------------------- report

def report(results):
    """Print one block per interpreter; True if every required target is met."""
    ok = True
    first = results[0]
    print("canonical Build graph: {:.1f} MB, {} ops".format(first["size"] / 1e6, first["ops"]))
    for res in results:
        mb = res["size"] / 1e6
        scan = mb / res["scan_s"]
        parse = res["parse_size"] / 1e6 / res["parse_s"]
        cli = mb / res["parse_cli_s"]
        ratio = scan / parse
        met = scan >= TARGET_MBPS and ratio >= TARGET_RATIO
        ok = ok and met and cli >= PARSE_TARGET_MBPS
        print("\nPython {} (protobuf {} backend), {} cores".format(
            res["python"], res["protobuf"], res["cores"]))
        print("  parse --json (cli.main)  {:8.1f} MB/s   {:6.3f} s   target >= {:.0f} MB/s: {}".format(
            cli, res["parse_cli_s"], PARSE_TARGET_MBPS, "met" if cli >= PARSE_TARGET_MBPS else "MISSED"))
        print("  the whole command        {:8.1f} MB/s   {:6.3f} s   (new interpreter, imports included)".format(
            mb / res["parse_command_s"], res["parse_command_s"]))
        print("  iter_graphs, {} cores     {:8.1f} MB/s   {:6.3f} s".format(
            res["cores"], mb / res["scan_workers_s"], res["scan_workers_s"]))
        print("  iter_graph_counts, 1     {:8.1f} MB/s   {:6.3f} s".format(
            mb / res["count_s"], res["count_s"]))
        print("  scanner (iter_graphs)   {:8.1f} MB/s   {:6.3f} s for {:.1f} MB".format(
            scan, res["scan_s"], mb))
        print("  text_format.Parse       {:8.2f} MB/s   {:6.3f} s for {:.1f} MB".format(
            parse, res["parse_s"], res["parse_size"] / 1e6))
        print("  ratio                   {:8.0f}x".format(ratio))
        print("  one process: >= {:.0f} MB/s and >= {:.0f}x text_format: {}".format(
            TARGET_MBPS, TARGET_RATIO, "met" if met else "MISSED"))
        print("  non-canonical variants (1/4 size -> full size; linear time: ~4x):")
        for row in res["variants"]:
            quarter, full = row["quarter"], row["full"]
            print("    {:<52} {:5.1f} MB {:6.2f} s -> {:5.1f} MB {:6.2f} s  "
                  "x{:.1f} time for x{:.1f} data, {:5.1f} MB/s".format(
                      row["what"], quarter["size"] / 1e6, quarter["s"], full["size"] / 1e6,
                      full["s"], full["s"] / quarter["s"], full["size"] / quarter["size"],
                      full["size"] / 1e6 / full["s"]))
    return ok


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 MB instead of 60 MB")
    parser.add_argument("--mb", type=float, default=None, help="canonical file size in MB")
    parser.add_argument("--parse-mb", type=float, default=None,
                        help="MB given to text_format.Parse (default 4, --quick 1)")
    parser.add_argument("--declined-mb", type=float, default=None,
                        help="size of the variant the tokenizer reads (default 8, --quick 2)")
    parser.add_argument("--repeat", type=int, default=3, help="scans of the canonical file")
    parser.add_argument("--python", action="append", default=[], metavar="PATH",
                        help="also time in this interpreter (npu_dump_hook importable)")
    parser.add_argument("--child", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    parse_mb = args.parse_mb or (1.0 if args.quick else 4.0)
    if args.child:
        print(json.dumps(time_all(args.child, args.repeat, int(parse_mb * 1e6))))
        return 0
    megabytes = args.mb or (5.0 if args.quick else 60.0)
    declined_mb = args.declined_mb or (2.0 if args.quick else 8.0)
    with tempfile.TemporaryDirectory(prefix="bench_ge_graph_") as folder:
        build_file(os.path.join(folder, CANONICAL), int(megabytes * 1e6))
        write_variants(folder, os.path.join(folder, CANONICAL), int(declined_mb * 1e6))
        results = [time_all(folder, args.repeat, int(parse_mb * 1e6))]
        for python in args.python:
            here = os.path.dirname(os.path.abspath(__file__))
            out = subprocess.run(
                [python, os.path.join(here, "bench_ge_graph.py"), "--child", folder,
                 "--repeat", str(args.repeat), "--parse-mb", str(parse_mb)],
                check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
    return 0 if report(results) else 1


if __name__ == "__main__":
    sys.exit(main())
