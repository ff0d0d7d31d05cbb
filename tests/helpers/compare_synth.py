"""Synthetic NPU runs for the compare tests: a Build graph (GE text written from ge_ir
messages), one dump step folder of v2 dump files, and msaccucmp-named golden .npy files.

``Synth.op(...)`` adds one op with its golden output value and, unless ``dump=False``, its
NPU value (default: the golden one), written in a device format and dtype when asked.
``Synth.write()`` writes everything and returns the paths; ``bundle()`` turns the result
into a minimal bundle folder (data/bundle.json, data/graph, data/dump, data/golden).
"""
import json
import os

import numpy as np

from npu_dump_hook.formats.device_format import from_original
from npu_dump_hook.formats.dump_file import DumpTensor, write_dump_file
from npu_dump_hook.formats.ge_build import make_model, make_op, make_tensor_desc
from npu_dump_hook.formats.ge_text import format_model
from npu_dump_hook.formats.names import format_dump_name, format_npy_name, sanitize

from helpers.bundles import list_bundle_json

GRAPH_NAME = "ge_default_20261201000000_1"
T0 = 1700000000000000


class _Op(object):
    def __init__(self, name, op_type, inputs, outputs, npu, original_names, origins, fmt, dump, no_task,
                 dump_inputs, dtype):
        self.name, self.type, self.inputs, self.outputs, self.npu = name, op_type, inputs, outputs, npu
        self.original_names, self.origins, self.format, self.dump = original_names, origins, fmt, dump
        self.no_task, self.dump_inputs, self.dtype = no_task, dump_inputs, dtype


class Synth(object):
    def __init__(self, root, dump_mode="output"):
        self.root = str(root)
        self.dump_mode = dump_mode
        self.ops = []
        self.golden = {}  # (tf name, index) -> array
        self.values = {}  # (npu op, index) -> NPU array (original layout)

    def golden_value(self, name, value, index=0):
        """A golden tensor of a TF op that is not an NPU op of its own (fused originals)."""
        self.golden[(name, index)] = np.asarray(value)

    def op(self, name, op_type, value, inputs=(), npu=None, original_names=None, origin=None, fmt=None,
           dump=True, no_task=False, golden=True, dtype=None, graph_origin=True, timestamp=None):
        """``value``: golden output 0 (or a list of outputs); ``npu``: the NPU values (default: value);
        ``origin``: (tf name, index) of output 0 (default: this op); ``fmt``: (device format,
        original format) of the dump; ``dtype``: numpy dtype of the NPU payload (float16 ...);
        ``graph_origin=False``: no _datadump_origin_* attrs in the graph (the header's original_op decides);
        ``timestamp``: the dump's (default ``T0 + 10 * graph position``: execution order is graph order)."""
        outputs = [np.asarray(v) for v in (value if isinstance(value, list) else [value])]
        npu_values = [np.asarray(v) for v in (npu if isinstance(npu, list) else [npu])] if npu is not None \
            else list(outputs)
        origins = [origin or (name, 0)] + [(name, i) for i in range(1, len(outputs))]
        if golden:
            for (tf_name, index), array in zip(origins, outputs):
                self.golden.setdefault((tf_name, index), array)
        for index, array in enumerate(npu_values):
            self.values[(name, index)] = array
        self.ops.append(_Op(name, op_type, list(inputs), outputs, npu_values, original_names, origins, fmt, dump,
                            no_task, self.dump_mode in ("all", "input"), dtype))
        self.ops[-1].graph_origin = graph_origin
        self.ops[-1].timestamp = timestamp
        return name

    # ----------------------------------------------------------------- writing
    def _desc(self, op, index, array):
        layout = op.format[1] if op.format else ("NHWC" if array.ndim == 4 else "ND")
        name, slot = op.origins[index]
        dtype = "DT_FLOAT16" if op.dtype == np.float16 else _dt(array)
        if not op.graph_origin:
            return make_tensor_desc(dtype, array.shape, layout=layout)
        return make_tensor_desc(dtype, array.shape, layout=layout, origin_name=name, origin_output_index=slot)

    def model(self):
        ops = []
        for position, op in enumerate(self.ops):
            ops.append(make_op(op.name, op.type, position, inputs=op.inputs,
                               output_descs=[self._desc(op, i, a) for i, a in enumerate(op.outputs)],
                               original_op_names=op.original_names, no_task=True if op.no_task else None))
        return make_model([(GRAPH_NAME, ops)], name=GRAPH_NAME)

    def _tensor(self, op, array, index, output):
        array = np.asarray(array)
        if op.dtype is not None and array.dtype.kind == "f":
            with np.errstate(over="ignore"):  # beyond the float16 range: inf, as on the device
                array = array.astype(op.dtype)
        original_shape = array.shape
        fmt = "ND"
        if op.format and output:
            fmt = op.format[0]
            array = from_original(array, fmt, op.format[1])
        kwargs = {}
        if output:
            name, slot = op.origins[index]
            kwargs = {"original_name": name, "original_output_index": slot}
        if array.dtype.kind in "SUO":
            raw = np.frombuffer(b"".join(s.encode() if isinstance(s, str) else s for s in array.ravel()), np.uint8)
            return DumpTensor(raw, data_type="DT_STRING", shape=original_shape, **kwargs)
        return DumpTensor(np.ascontiguousarray(array), format=fmt, original_shape=original_shape, **kwargs)

    def _input_values(self, op):
        values = []
        for text in op.inputs:
            src, _, slot = text.rpartition(":")
            if slot == "-1":
                continue
            values.append(self.values[(src, int(slot))])
        return values

    def write(self):
        """Write graph, step folder and golden folder under root; returns (graph, step_dir, golden_dir)."""
        graphs = os.path.join(self.root, "graph")
        step = os.path.join(self.root, "dump", "20261201000000", "0", GRAPH_NAME, "1", "0")
        golden = os.path.join(self.root, "golden")
        for folder in (graphs, step, golden):
            os.makedirs(folder, exist_ok=True)
        graph = os.path.join(graphs, "ge_proto_00000001_Build.txt")
        with open(graph, "w") as handle:
            handle.write(format_model(self.model()))
        for position, op in enumerate(self.ops):
            if op.no_task or not op.dump:
                continue
            stamp = op.timestamp if op.timestamp is not None else T0 + 10 * position
            outputs = [self._tensor(op, a, i, True) for i, a in enumerate(op.npu)] if self.dump_mode != "input" else []
            inputs = [self._tensor(op, a, i, False) for i, a in enumerate(self._input_values(op))] \
                if op.dump_inputs else []
            name = format_dump_name(sanitize(op.type), sanitize(op.name), 2 + position, 0, stamp)
            write_dump_file(os.path.join(step, name), op.name, outputs=outputs, inputs=inputs, dump_time=stamp)
        for number, ((tf_name, index), array) in enumerate(sorted(self.golden.items())):
            np.save(os.path.join(golden, format_npy_name(tf_name, index, T0 + number)), array)
        self.graph, self.step_dir, self.golden_dir = graph, step, golden
        return graph, step, golden

    def bundle(self, extra=None):
        """The written run as a minimal bundle folder at root/bundle (data/bundle.json etc.)."""
        if not hasattr(self, "graph"):
            self.write()
        dest = os.path.join(self.root, "bundle")
        data = os.path.join(dest, "data")
        os.makedirs(data, exist_ok=True)
        for sub in ("graph", "dump", "golden"):
            os.rename(os.path.join(self.root, sub), os.path.join(data, sub))
        doc = {"schema": "npu_dump_hook/bundle@1", "backend": "emulated",
               "graph": {"file": "graph/ge_proto_00000001_Build.txt"}, "options": {"dump_mode": self.dump_mode}}
        doc.update(extra or {})
        with open(os.path.join(data, "bundle.json"), "w") as handle:
            json.dump(doc, handle)
        return list_bundle_json(dest)


def _dt(array):
    return {"float32": "DT_FLOAT", "float16": "DT_FLOAT16", "int32": "DT_INT32", "int64": "DT_INT64",
            "bool": "DT_BOOL", "float64": "DT_DOUBLE"}.get(array.dtype.name, "DT_STRING")


def chain(synth, n, start, fault_at=None, scale=1.05, prefix="op", first_input="x:0", npu_start=None):
    """n Add-like ops in a chain from ``start`` (golden value of the first input; ``npu_start`` the
    NPU's, default the same): op_i = prev + 0.5; the NPU op ``fault_at`` multiplies its result
    by ``scale``, and an error flows downstream."""
    gold = np.asarray(start, np.float32)
    npu = gold.copy() if npu_start is None else np.asarray(npu_start, np.float32)
    names = []
    previous = first_input
    for i in range(n):
        gold = gold + np.float32(0.5)
        npu = npu + np.float32(0.5)
        if i == fault_at:
            npu = npu * np.float32(scale)
        name = "{}/add_{}".format(prefix, i)
        synth.op(name, "Add", gold, inputs=[previous], npu=npu)
        names.append(name)
        previous = name + ":0"
    return names
