"""Run msaccucmp (PyPI mindstudio-probe) inside its own venv, for benchmarks/bench_compare.py.

Runs ONLY under the msprobe venv's Python, in a subprocess of the benchmark; it is not part
of the package and nothing of the package imports it. Two modes:

* ``compare ARGS...``: msaccucmp's own ``compare`` command (``msaccucmp.py compare ARGS``),
  with one change: ``BigDumpDataParser._parse_dump_to_json`` (dump_parse/big_dump_data.py),
  which calls the CANN C library libascend_dump_parser.so that no registry ships, is
  replaced by a decoder built on npu_dump_hook's dump schema. It leaves ``self.dump_json_data``
  as the dict docs/reference/msaccucmp-notes.md describes: the DumpData header with protobuf field names and
  integer enum values. Everything else (payload reading, format conversion, matching, the
  metrics, the CSV) is msaccucmp's own code.
* ``metrics DIR``: msaccucmp's AlgorithmManager (all ten built-in algorithms) on every pair
  ``DIR/<name>.npu.npy`` / ``DIR/<name>.golden.npy``, called as its compare does (flattened
  arrays; my_output_dump_file / ground_truth_dump_file = the two paths; the shape type from
  the NPU array's shape); writes one JSON object ``{name: {"cells": [...], "reason": str}}``
  to OUT.json.

    <msprobe venv>/bin/python benchmarks/_msaccucmp_harness.py compare -m DUMPS -g GOLDEN -f GRAPH.json -out OUT
    <msprobe venv>/bin/python benchmarks/_msaccucmp_harness.py metrics DIR OUT.json
"""
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _msaccucmp_dir() -> str:
    import importlib.util

    spec = importlib.util.find_spec("msprobe")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("msprobe (mindstudio-probe) is not installed in " + sys.prefix)
    return os.path.join(list(spec.submodule_search_locations)[0], "msaccucmp")


def _is_repeated(field) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf >= 6 (``label`` is gone in 7)
    if flag is not None:
        return bool(flag() if callable(flag) else flag)
    return field.label == field.LABEL_REPEATED


def _message_dict(message) -> dict:
    """A protobuf message as a dict of its field names (defaults included), ints kept as ints.

    The payload bytes field ``data`` is left out: msaccucmp fills it from the file itself.
    """
    out = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        repeated = _is_repeated(field)
        if field.message_type is not None:
            out[field.name] = [_message_dict(v) for v in value] if repeated else _message_dict(value)
        elif isinstance(value, bytes) or (repeated and field.type == field.TYPE_BYTES):
            continue
        else:
            out[field.name] = list(value) if repeated else value
    return out


def _header_dict(path: str) -> dict:
    """The DumpData header of ``path`` decoded with npu_dump_hook's reader, as msaccucmp wants it."""
    from npu_dump_hook.formats import dump_file

    return _message_dict(dump_file.read_header(path).header)


def _patch_big_dump_parser() -> None:
    from dump_parse import big_dump_data

    def _parse_dump_to_json(self):
        self.dump_json_data = _header_dict(self.dump_file_path)

    big_dump_data.BigDumpDataParser._parse_dump_to_json = _parse_dump_to_json


def _run_compare(argv) -> int:
    sys.argv = [os.path.join(_msaccucmp_dir(), "msaccucmp.py"), "compare"] + list(argv)
    import runpy

    _patch_big_dump_parser()
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as stop:
        return int(stop.code or 0) if not isinstance(stop.code, str) else 3
    return 0


def _run_metrics(folder: str, out_path: str) -> int:
    import numpy as np
    from algorithm_manager.algorithm_manager import AlgorithmManager
    from cmp_utils import utils

    manager = AlgorithmManager("", "all", "")
    out = {}
    for npu_path in sorted(glob.glob(os.path.join(folder, "*.npu.npy"))):
        name = os.path.basename(npu_path)[: -len(".npu.npy")]
        golden_path = os.path.join(folder, name + ".golden.npy")
        npu = np.load(npu_path)
        golden = np.load(golden_path)
        cells, errors = manager.compare(npu.flatten(), golden.flatten(), {
            "my_output_dump_file": npu_path,
            "ground_truth_dump_file": golden_path,
            "shape_type": utils.get_shape_type(npu.shape),
        })
        out[name] = {"cells": [str(c) for c in cells], "reason": ",".join(errors)}
    with open(out_path, "w") as fh:
        json.dump(out, fh)
    return 0


def main(argv) -> int:
    if len(argv) < 1 or argv[0] not in ("compare", "metrics") or (argv[0] == "metrics" and len(argv) != 3):
        print(__doc__, file=sys.stderr)
        return 2
    sys.path.insert(0, _msaccucmp_dir())
    sys.path.append(REPO)  # npu_dump_hook, for its dump-file reader
    if argv[0] == "compare":
        return _run_compare(argv[1:])
    return _run_metrics(argv[1], argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
