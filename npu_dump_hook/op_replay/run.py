"""Run a replay request on CPU (imports TensorFlow, through ``_tf``): ``python -m npu_dump_hook.op_replay
REQUEST_DIR``, or ``--serve`` (import first, then the folder named on stdin; what compare starts).

Request folder: ``request.json``::

    {"graph": "<bundle>/data/tf/graph.pbtxt",
     "jobs": [{"id": 0, "chain": ["conv5/Conv2D", "conv5/BiasAdd", "conv5/Relu"], "fetch": "conv5/Relu:0",
               "inputs": [{"tensor": "pool2/MaxPool:0", "file": "j0_in0.npy"}, ...], "round16": true}]}

``inputs`` are the NPU's dumped inputs of the row's op, in slot order, already converted to
their original shape and widened from float16 (the caller does that, TF-free); ``tensor`` is
the TF tensor each was matched to (None when unknown). Each chain input is fed, in order: the
dumped input matched to the same TF tensor (unless a ``Const`` node of the graph makes that
tensor in another shape: then the constant), else the value of a ``Const`` node of the graph,
else the next dumped input not yet used (positional); each in the shape the graph's
``_output_shapes`` records for it when that holds as many elements (GE dumps scalars as ``[1]``). ``result.json``: per job ``outputs``
(variant -> .npy file: ``f32``, ``f64`` and, with ``round16``, ``f16`` -- float32 with every op's
result rounded through float16 as a float16 device writes it), ``errors`` per variant that
failed, or ``refused`` (why the chain is not rebuilt, :func:`._nodes.refusal`).
"""
import json
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from google.protobuf import text_format

from .. import _tf
from ._nodes import NodeIndex, external_inputs, refusal, tensor_name

__all__ = ["run_request", "main"]

_FLOATS = ("DT_HALF", "DT_FLOAT", "DT_DOUBLE", "DT_BFLOAT16")
_VARIANTS = (("f32", "DT_FLOAT", False), ("f64", "DT_DOUBLE", False), ("f16", "DT_FLOAT", True))


def _types() -> Tuple[Any, Any]:
    types = _tf.types_pb2()
    return types, frozenset(types.DataType.Value(name) for name in _FLOATS)


def _set_float_type(node: Any, target: int) -> None:
    types, floats = _types()
    for name in node.attr:
        value = node.attr[name]
        if value.HasField("type") and value.type in floats:
            value.type = target
        elif value.HasField("list") and len(value.list.type):
            value.list.type[:] = [target if t in floats else t for t in value.list.type]


def _clean(node: Any) -> Any:
    """A copy of ``node`` without device, colocation or other ``_`` attrs and control inputs."""
    copy = type(node)()
    copy.CopyFrom(node)
    copy.device = ""
    for name in [n for n in copy.attr if n.startswith("_")]:
        del copy.attr[name]
    copy.input[:] = [i for i in copy.input if not i.startswith("^")]
    return copy


def _feeds(job: Dict[str, Any], folder: str, index: NodeIndex, outside: List[str]) -> Dict[str, np.ndarray]:
    """Each chain input's value (see the module doc); ValueError naming an input with none."""
    dumped = [(entry.get("tensor"), np.load(os.path.join(folder, entry["file"]), allow_pickle=False))
              for entry in job["inputs"]]
    used, values = set(), {}  # type: set, Dict[str, np.ndarray]
    for tensor in outside:
        for slot, (name, value) in enumerate(dumped):
            if name == tensor and slot not in used:
                used.add(slot)
                values[tensor] = value
                break
    for tensor in outside:
        constant = _constant(index, tensor)
        if constant is not None and (tensor not in values or values[tensor].shape != constant.shape):
            values[tensor] = constant  # a graph constant dumped in another shape (GE's [0] "no data")
        if tensor in values:
            continue
        free = [slot for slot in range(len(dumped)) if slot not in used]
        if not free:
            raise ValueError("chain input {} is neither a dumped NPU input nor a constant of the graph".format(
                tensor))
        used.add(free[0])
        values[tensor] = dumped[free[0]][1]
    return {tensor: _graph_shaped(index, tensor, value) for tensor, value in values.items()}


def _graph_shaped(index: NodeIndex, tensor: str, value: np.ndarray) -> np.ndarray:
    """``value`` in the shape the graph's ``_output_shapes`` gives ``tensor`` when that shape is known
    and holds as many elements (GE dumps a scalar as ``[1]``)."""
    name, _, slot = tensor.rpartition(":")
    node = index.node(name)
    if node is None or "_output_shapes" not in node.attr or not slot.isdigit():
        return value
    shapes = node.attr["_output_shapes"].list.shape
    if int(slot) >= len(shapes) or shapes[int(slot)].unknown_rank:
        return value
    dims = [d.size for d in shapes[int(slot)].dim]
    if any(d < 0 for d in dims) or int(np.prod(dims, dtype=np.int64)) != value.size or list(value.shape) == dims:
        return value
    return value.reshape(dims)


def _constant(index: NodeIndex, tensor: str) -> Optional[np.ndarray]:
    """The value of ``tensor`` when a ``Const`` node of the graph makes it, else None."""
    name, _, slot = tensor.rpartition(":")
    node = index.node(name) if slot == "0" else None
    if node is None or node.op != "Const" or "value" not in node.attr:
        return None
    proto = node.attr["value"].tensor
    _check_expansion(name, proto)
    return _tf.graph_runtime().make_ndarray(proto)


#: A constant may declare more elements than its text holds (one value filling a shape); up to
#: this many, so that a bundle's few bytes never become gigabytes in the replay process.
MAX_FILLED_ELEMENTS = 1 << 24


def _check_expansion(name: str, proto: Any) -> None:
    """ValueError when the TensorProto of constant ``name`` declares far more elements than it holds."""
    declared = 1
    for dim in proto.tensor_shape.dim:
        declared *= max(int(dim.size), 0)
    held = len(proto.tensor_content) + sum(len(getattr(proto, field)) for field in _VALUE_FIELDS)
    if declared > MAX_FILLED_ELEMENTS and declared > held:
        raise ValueError("constant {} declares {} elements but holds {} values: not expanded (at most {} "
                         "filled elements)".format(name, declared, held, MAX_FILLED_ELEMENTS))


_VALUE_FIELDS = ("half_val", "float_val", "double_val", "int_val", "int64_val", "bool_val", "string_val",
                 "scomplex_val", "dcomplex_val", "uint32_val", "uint64_val")


def _graph_def(chain: List[Any], values: Dict[str, np.ndarray], target: int, round16: bool) -> Tuple[Any, Dict]:
    """The GraphDef of placeholders for ``values`` and the chain in type ``target``; the feed names."""
    tf = _tf.graph_runtime()
    types, floats = _types()
    graph_def = tf.GraphDef()
    placeholders, feeds = {}, {}  # type: Dict[str, str], Dict[str, np.ndarray]
    for number, (tensor, value) in enumerate(sorted(values.items())):
        name = "npu_dump_hook_replay/input_{}".format(number)
        floating = np.issubdtype(value.dtype, np.floating)
        dtype = tf.as_dtype(np.float64 if floating and target == types.DT_DOUBLE else
                            np.float32 if floating else value.dtype)
        holder = graph_def.node.add(name=name, op="Placeholder")
        holder.attr["dtype"].type = dtype.as_datatype_enum
        placeholders[tensor] = name
        feeds[name + ":0"] = value.astype(dtype.as_numpy_dtype)
    inside = set(node.name for node in chain)
    for node in chain:
        copy = _clean(node)
        _set_float_type(copy, target)
        refs = []
        for reference in copy.input:
            tensor = tensor_name(reference)
            if tensor in placeholders:
                refs.append(placeholders[tensor])
            elif round16 and tensor.rpartition(":")[0] in inside:
                refs.append(_rounded(graph_def, tensor))
            else:
                refs.append(reference)
        copy.input[:] = refs
        graph_def.node.extend([copy])
    return graph_def, feeds


def _rounded(graph_def: Any, tensor: str) -> str:
    """``tensor`` rounded through float16 (two Casts added once); the name to read it by."""
    base = "npu_dump_hook_replay/round16/" + tensor.replace(":", "_")
    if not any(node.name == base + "/back" for node in graph_def.node):
        types, _ = _types()
        down = graph_def.node.add(name=base + "/half", op="Cast", input=[tensor])
        down.attr["SrcT"].type, down.attr["DstT"].type = types.DT_FLOAT, types.DT_HALF
        back = graph_def.node.add(name=base + "/back", op="Cast", input=[base + "/half"])
        back.attr["SrcT"].type, back.attr["DstT"].type = types.DT_HALF, types.DT_FLOAT
    return base + "/back"


def _run(graph_def: Any, feeds: Dict[str, np.ndarray], fetch: str) -> np.ndarray:
    tf = _tf.graph_runtime()
    config = tf.ConfigProto(device_count={"GPU": 0}, inter_op_parallelism_threads=1,
                            intra_op_parallelism_threads=2)
    with tf.Graph().as_default() as graph:
        tf.import_graph_def(graph_def, name="")
        with tf.Session(graph=graph, config=config) as session:
            return np.asarray(session.run(fetch, feed_dict=feeds))


def _chain(job: Dict[str, Any], index: NodeIndex) -> Tuple[List[Any], Optional[str]]:
    chain = []
    for name in job["chain"]:
        node = index.node(name)
        if node is None:
            return [], "{}: not in the bundle's TF graph".format(name)
        why = refusal(node, _tf.op_def(node.op))
        if why is None and node.op == "Const" and "value" in node.attr:
            try:
                _check_expansion(name, node.attr["value"].tensor)
            except ValueError as exc:
                why = str(exc)
        if why is not None:
            return [], why
        chain.append(node)
    return chain, None


def _fetch(job: Dict[str, Any], chain: List[Any]) -> str:
    fetch = job.get("fetch") or ""
    if fetch.rpartition(":")[0] in set(node.name for node in chain):
        return fetch
    return "{}:{}".format(chain[-1].name, int(job.get("slot") or 0))


def _message(exc: Exception) -> str:
    """The line of a TensorFlow error that says what went wrong (TF 2.x puts "Graph execution error:"
    and the node's Python traceback first), at most 300 characters."""
    lines = [line.strip() for line in str(getattr(exc, "message", exc)).splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith(("Graph execution error", "Detected at node", "File ",
                                                           "[[", "Original stack trace", "Traceback"))]
    return (said or lines or [""])[-1][:300]


def replay_job(job: Dict[str, Any], folder: str, index: NodeIndex) -> Dict[str, Any]:
    """One job of the request (see the module doc)."""
    result = {"id": job["id"], "outputs": {}, "errors": {}, "refused": None}  # type: Dict[str, Any]
    try:
        chain, why = _chain(job, index)
    except Exception as exc:  # text_format.ParseError and the like: the graph text is not a GraphDef there
        chain, why = [], "the bundle's TF graph does not parse there: {}: {}".format(type(exc).__name__,
                                                                                   str(exc)[:300])
    if why is None and not chain:
        why = "no original op to replay"
    if why is not None:
        result["refused"] = why
        return result
    try:
        values = _feeds(job, folder, index, external_inputs(chain))
    except ValueError as exc:
        result["refused"] = str(exc)
        return result
    types, _ = _types()
    for variant, dtype, round16 in _VARIANTS:
        if round16 and not job.get("round16"):
            continue
        try:
            graph_def, feeds = _graph_def(chain, values, types.DataType.Value(dtype), round16)
            output = _run(graph_def, feeds, _fetch(job, chain))
        except Exception as exc:  # a kernel missing for this type: that variant is reported, the others run
            result["errors"][variant] = "{}: {}".format(type(exc).__name__, _message(exc))
            continue
        if round16:
            output = output.astype(np.float16)
        name = "j{}_{}.npy".format(job["id"], variant)
        np.save(os.path.join(folder, name), output, allow_pickle=False)
        result["outputs"][variant] = name
    return result


def run_request(folder: str) -> Dict[str, Any]:
    """Replay ``folder``/request.json; writes and returns result.json's document."""
    with open(os.path.join(folder, "request.json"), encoding="utf-8") as handle:
        request = json.load(handle)
    with open(request["graph"], encoding="utf-8") as handle:
        text = handle.read()
    tf = _tf.graph_runtime()
    index = NodeIndex(text, lambda block: text_format.Parse(block, tf.GraphDef()))
    doc = {"jobs": [replay_job(job, folder, index) for job in request["jobs"]], "tensorflow": tf.version}
    with open(os.path.join(folder, "result.json"), "w", encoding="utf-8") as handle:
        json.dump(doc, handle)
    return doc


def main(argv: List[str]) -> int:
    """``REQUEST_DIR``: replay it; ``--serve``: import TensorFlow first, then replay the folder named by
    the first line of stdin (none: exit), so the import overlaps the caller's comparison."""
    if len(argv) != 1:
        sys.stderr.write("usage: python -m npu_dump_hook.op_replay REQUEST_DIR | --serve\n")
        return 2
    # a process of its own: TensorFlow's public API is not built (_tf.graph_runtime, lean)
    _tf.graph_runtime(lean=True).get_logger().setLevel("ERROR")
    folder = argv[0]
    if folder == "--serve":
        folder = sys.stdin.readline().strip()
        if not folder:
            return 0
    run_request(folder)
    return 0
