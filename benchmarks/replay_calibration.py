"""Calibration of replay's verdict (compare --replay; docs/compare.md, "Replay") on the emulator's
ascend profile.

Trains ``npu_dump_hook.sample_models.deep_cnn`` (8 convolutions, 3 dense layers; SGD, momentum and
Adam; ``dump_mode all``) without a fault, replays **every** compared output row that has original
TF ops, and prints per op type the ratio of the local error (NPU output vs CPU float64 on the
NPU's own inputs) to what the op's precision explains (``expected``: float16 rounding's error,
or CPU float32's own): the worst healthy ratio beside REPLAY_FACTOR, the verdicts (a healthy run
must have no ``kernel``), and the rows that were not replayed with why. Then ``scale=1.05`` and
``scale=1.02`` faults on fused convolutions (their last op ``convN/Relu``): the first
divergence's local error against its tolerance (it must be ``kernel``). Needs TensorFlow;
about 3 minutes on one core (``--quick``: momentum only, one fault)::

    PYTHONPATH=. .venv/bin/python benchmarks/replay_calibration.py [--quick]
"""
import argparse
import collections
import logging
import shutil
import sys
import tempfile

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.compare import compare
from npu_dump_hook.compare.replay import REPLAY_FACTOR, REPLAY_FLOOR
from npu_dump_hook.sample_models import deep_cnn


def pair(root, optimizer, fault=None):
    options = DumpOptions(enable_dump=True, dump_path=root + "/dump", dump_mode="all")
    npu = NpuDumpHook(options, output_dir=root + "/npu", backend="emulated", emulate_profile="ascend",
                      faults={fault[0]: "scale={}".format(fault[1])} if fault else None)
    deep_cnn.train(options, hooks=[npu], optimizer=optimizer)
    golden = NpuDumpHook(options, output_dir=root + "/golden", initial_state=npu.bundle.location)
    deep_cnn.train(options, hooks=[golden], optimizer=optimizer)
    return npu.bundle.location, golden.bundle.location


def healthy(optimizer, table, refused, verdicts):
    root = tempfile.mkdtemp(prefix="replay_cal_")
    try:
        npu, golden = pair(root, optimizer)
        rows = compare(npu, golden, workers=1).doc["rows"]
        ops = sorted(set(r["npu_op"] for r in rows if r["direction"] == "output" and r["status"] != "not_compared"
                         and r["ground_truth"] and not r["npu_op"].startswith("trans_")))
        section = compare(npu, golden, workers=1, replay_op=ops).doc["replay"]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for entry in section["rows"]:
        if entry["verdict"] is None:
            refused[entry["reason"].split(":")[0] + ": " + entry["op_type"]] += 1
            continue
        verdicts[entry["verdict"]] += 1
        local, expected = entry["local_f64"]["rel_euclid"], entry["expected"]
        ratio = local / expected if expected else (0.0 if local == 0 else float("inf"))
        table[entry["op_type"]].append((ratio, local, expected, optimizer, entry["tensor"]))
    return section


def faulted(optimizer, op, scale):
    root = tempfile.mkdtemp(prefix="replay_cal_")
    try:
        result = compare(*pair(root, optimizer, (op, scale)), workers=1, replay=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    entry = result.doc["replay"]["rows"][0] if result.doc["replay"]["rows"] else None
    return entry


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    logging.getLogger("npu_dump_hook").setLevel(logging.ERROR)
    optimizers = ("momentum",) if args.quick else ("sgd", "momentum", "adam")
    table, refused, verdicts = collections.defaultdict(list), collections.Counter(), collections.Counter()
    for optimizer in optimizers:
        healthy(optimizer, table, refused, verdicts)
    print("healthy runs ({}), dump_mode all: local error / expected per op type (REPLAY_FACTOR {:g}, "
          "floor {:g})".format(", ".join(optimizers), REPLAY_FACTOR, REPLAY_FLOOR))
    print("{:<28} {:>5} {:>10} {:>12} {:>12}  worst row".format("op type", "rows", "max ratio", "max local",
                                                               "max expected"))
    worst = 0.0
    for kind in sorted(table):
        items = table[kind]
        top = max(items)
        worst = max(worst, top[0] if top[1] > REPLAY_FLOOR else 0.0)
        print("{:<28} {:>5} {:>10.3g} {:>12.3g} {:>12.3g}  {} ({})".format(
            kind, len(items), top[0], max(i[1] for i in items), max(i[2] for i in items), top[4], top[3]))
    print("verdicts: {}".format(dict(verdicts)))
    print("not replayed: {}".format(dict(refused)))
    print("worst healthy ratio above the floor {:.3g} vs REPLAY_FACTOR {:g}: {}".format(
        worst, REPLAY_FACTOR, "OK" if worst <= REPLAY_FACTOR and not verdicts["kernel"] else "MISCALIBRATED"))
    faults = [("momentum", "conv5/Relu", 1.05)] if args.quick else [
        (o, op, s) for o in ("momentum", "adam") for op in ("conv2/Relu", "conv5/Relu", "conv8/Relu")
        for s in (1.05, 1.02)]
    failed = 0
    print("faults: first divergence replayed")
    for optimizer, op, scale in faults:
        entry = faulted(optimizer, op, scale)
        verdict = entry["verdict"] if entry else None
        failed += verdict != "kernel"
        print("  {:<9} {:<11} scale={:<5} {:<10} local {:.4g} tolerance {:.4g} (x{:.0f} margin)".format(
            optimizer, op, scale, str(verdict), entry["local_f64"]["rel_euclid"] if verdict else float("nan"),
            entry["tolerance"] if verdict else float("nan"),
            entry["local_f64"]["rel_euclid"] / entry["tolerance"] if verdict else float("nan")))
    return 1 if failed or verdicts["kernel"] or worst > REPLAY_FACTOR else 0


if __name__ == "__main__":
    sys.exit(main())
