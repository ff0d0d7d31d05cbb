"""NPU numerics inside the TF graph: float16 Cube ops (``allow_fp32_to_fp16``) and injected kernel faults.

The emulated NPU run must compute what an Ascend device computes, so that a numerical
error made by one op reaches every op downstream of it, as on hardware. :func:`apply`
rewrites a not-yet-finalized ``tf.Graph`` in place (the hook's ``begin``, after the
optimizer built the gradients) and returns a :class:`NumericsPlan` that tells the
emulator which tensor holds the NPU value of each original tensor.

Float16 ops (:data:`FP16_OP_TYPES`)
-----------------------------------
Under the precision mode ``allow_fp32_to_fp16`` (the default of Ascend training), GE
lowers an op from float32 to float16 only when its kernel has no float32 implementation
on the unit it runs on: the **Cube** unit (the matrix engine) multiplies float16 by
float16 with float32 accumulation and writes a float16 result, while **Vector** ops
(element-wise, reductions, BiasAdd, activations, BatchNorm, softmax, optimizer updates)
keep float32 where the op supports it. GE inserts ``Cast`` nodes around a lowered op.
The Cube ops of a TF training graph are the convolutions and matrix products, forward
and gradient:

* ``Conv2D``, ``Conv2DBackpropInput`` (also ``conv2d_transpose``), ``Conv2DBackpropFilter``;
* ``DepthwiseConv2dNative`` and its ``BackpropInput``/``BackpropFilter``;
* ``Conv3D``, ``Conv3DBackpropInput(V2)``, ``Conv3DBackpropFilter(V2)``;
* ``MatMul`` (GE ``MatMulV2``; the gradients of a ``MatMul`` are ``MatMul`` ops too),
  ``BatchMatMul``, ``BatchMatMulV2``, ``BatchMatMulV3`` (GE ``BatchMatMul(V2)``).

Not listed, on purpose: pooling, BiasAdd, BatchNorm, element-wise and reduction ops run
on the Vector unit in float32; ``Einsum`` and ``SparseMatMul`` are decomposed differently
by GE and are not emulated; grappler's fused ``_FusedConv2D``/``_FusedMatMul`` do not exist
in the Python graph this module edits.

The rewrite of one such op (only float32 tensors; integer inputs such as
``Conv2DBackpropInput``'s ``input_sizes`` are left alone)::

    x --> Cast(fp16) --> Cast(fp32) --> OP --> Cast(fp16) --> Cast(fp32) --> consumers of OP:i
          {OP}/npu_dump_hook_numerics/in_{j}/...   {OP}/npu_dump_hook_numerics/out_{i}/...

The op computes in float32 from float16 values (exact products, float32 sums: the Cube's
fp32 accumulation), and its result is rounded to float16 as the Cube writes it. Every
consumer of ``OP:i`` (forward ops, gradient ops, fetches excluded) reads the rounded tensor,
so the rounding error propagates. An input that already holds float16 values (the rounded
output of another Cube op) is not rounded again. An output nothing consumes is not rounded
in the graph (the emulator's float16 dump of it gives the same value). Ops inside a
control-flow context (``tf.while_loop``/``tf.cond`` v1) and ops inside graph functions are
left as they are, with the reason in ``report["skipped"]``.

Faults (``faults={"op name": spec}``)
-------------------------------------
A fault replaces what the kernel of that op writes, on every floating output of the op,
and every consumer reads the faulted tensor, so the error propagates like a wrong NPU
kernel's. On a float16 op the fault applies to the float16 result and is rounded to
float16 again (the kernel writes float16). Specs (:func:`parse_fault`):

``scale=X``      every element multiplied by ``X`` (finite, > 0).
``add_noise=S``  plus Gaussian noise of **absolute** standard deviation ``S`` (finite, > 0),
                 drawn by a stateless random op seeded ``[seed, crc32(tensor name)]``: two
                 graphs built alike, in any process, get the same noise.
``nondeterministic=S``  plus Gaussian noise of absolute standard deviation ``S`` seeded from
                 ``os.urandom`` when the graph is built: every run gets other noise, as a kernel
                 whose result depends on its reduction order (atomics) differs from run to run
                 (what ``compare --determinism`` finds).
``overflow``     the element(s) of largest magnitude become ``+inf``, as a float16 kernel
                 that overflows writes inf (float16 overflows first where the magnitude is
                 largest; the sign is ``+`` so that a Relu downstream keeps it).
``nan``          the element(s) of largest magnitude become NaN.

A faulted op must be in the graph (inside a TF 1.x ``tf.while_loop`` body or ``tf.cond`` branch
too: the fault is built in the op's control-flow context, so a loop-body op is faulted at every
iteration, as a wrong kernel would be), with a floating, non-reference output; otherwise :class:`~npu_dump_hook.errors.OptionError` (option
``faults``) is raised before the graph is touched: a fault that cannot be injected must
not let a comparison check pass silently. A faulted output nothing consumes still gets the
fault: the dump of the op shows it.

Every op the rewrite creates is named under ``{op}/npu_dump_hook_numerics/`` and listed
in :attr:`NumericsPlan.added_ops`: they are not GE ops (no dump file, not in the Build graph).
"""
import logging
import math
import os
import re
from collections import namedtuple
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set

from .. import _tf
from ..determinism import derived_seed
from ..errors import BackendError, OptionError

__all__ = ["FP16_OP_TYPES", "FAULT_KINDS", "SCOPE", "Fault", "NumericsPlan", "parse_fault", "apply",
           "fp16_lowering_problem"]

logger = logging.getLogger(__name__)

#: TF op types that ``allow_fp32_to_fp16`` runs in float16 on the Cube unit (see the module docstring).
FP16_OP_TYPES = frozenset((
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter",
    "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
    "Conv3D", "Conv3DBackpropInput", "Conv3DBackpropInputV2", "Conv3DBackpropFilter", "Conv3DBackpropFilterV2",
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3",
))  # type: FrozenSet[str]

FAULT_KINDS = ("scale", "add_noise", "nondeterministic", "overflow", "nan")
_VALUED_KINDS = frozenset(("scale", "add_noise", "nondeterministic"))

#: The name-scope component of every op :func:`apply` creates.
SCOPE = "npu_dump_hook_numerics"
_SCOPE_MARK = "/" + SCOPE + "/"
_MAX_SEED = 2 ** 63 - 1


class Fault(namedtuple("Fault", ("op", "kind", "value"))):
    """One injected kernel fault: ``op`` name, ``kind`` (one of :data:`FAULT_KINDS`), ``value``
    (the float of ``scale``/``add_noise``, None for ``overflow``/``nan``)."""

    __slots__ = ()

    @property
    def spec(self) -> str:
        """The canonical spec string (``"scale=1.05"``, ``"overflow"``)."""
        if self.value is None:
            return self.kind
        return "{}={!r}".format(self.kind, self.value)


def parse_fault(op_name: str, spec: Any) -> Fault:
    """Validate one ``faults`` entry and return its :class:`Fault`.

    ``spec`` is ``"scale=X"`` (X finite, > 0), ``"add_noise=S"`` (S finite, > 0),
    ``"overflow"`` or ``"nan"`` (surrounding blanks ignored), or a :class:`Fault` for the
    same op. Anything else raises ``OptionError("faults", {op_name: spec}, rule)``.
    """
    entry = {op_name: spec}
    if not isinstance(op_name, str) or not op_name.strip():
        raise OptionError("faults", entry, "keys must be non-empty op names")
    if isinstance(spec, Fault):
        if spec.op != op_name:
            raise OptionError("faults", entry, "the Fault is for op {!r}".format(spec.op))
        spec = spec.spec
    if not isinstance(spec, str):
        raise OptionError("faults", entry, "a spec is a string: " + _SPEC_RULE)
    kind, sep, raw = spec.strip().partition("=")
    kind = kind.strip()
    if kind not in FAULT_KINDS:
        raise OptionError("faults", entry, "unknown fault kind {!r}: {}".format(kind, _SPEC_RULE))
    if kind not in _VALUED_KINDS:
        if sep:
            raise OptionError("faults", entry, "{} takes no value: {}".format(kind, _SPEC_RULE))
        return Fault(op_name, kind, None)
    try:
        value = float(raw)
    except ValueError:
        raise OptionError("faults", entry, "{} needs a number: {}".format(kind, _SPEC_RULE))
    if not math.isfinite(value) or value <= 0:
        raise OptionError("faults", entry, "{} must be a finite number > 0".format(kind))
    return Fault(op_name, kind, value)


_SPEC_RULE = "expected scale=X, add_noise=S, nondeterministic=S (X, S finite > 0), overflow or nan"


class NumericsPlan(object):
    """What :func:`apply` did to a graph.

    ``alias``        ``"op:i" -> tensor name``: the tensor holding the NPU value of ``op:i``
                     (what the dump of ``op:i`` must show and what its consumers read), for
                     every rewritten output; tensors not listed hold their own NPU value.
    ``added_ops``    names of the ops the rewrite created (no dump file, not GE ops).
    ``fp16_tensors`` original tensor names the NPU holds in float16 (dump as DT_FLOAT16): the
                     float32 outputs of the rewritten float16 ops.
    ``fp16_ops``     names of the ops computed in float16: in the rewritten graph each float32
                     input ``op.inputs[j]`` holds float16 values (what the dump of that input shows,
                     as DT_FLOAT16: the NPU reads it behind the Cast GE inserts), and
                     ``original_of(op.inputs[j].name)`` names the tensor it came from.
    ``faults``       op name -> :class:`Fault` injected.
    ``report``       for run.json: ``fp16``, ``precision_mode``, ``seed``, ``fp16_op_types`` (types rewritten, with
                     counts), ``fp16_ops``, ``rounded_inputs``, ``rounded_outputs``, ``added_ops``
                     (counts), ``faults`` (op -> spec), ``notes`` and ``skipped``
                     (``[{op, type, reason}]``).
    """

    def __init__(self, alias: Dict[str, str], added_ops: FrozenSet[str], fp16_tensors: FrozenSet[str],
                 fp16_ops: FrozenSet[str], faults: Dict[str, Fault], report: Dict[str, Any],
                 origins: Dict[str, str]) -> None:
        self.alias = alias
        self.added_ops = added_ops
        self.fp16_tensors = fp16_tensors
        self.fp16_ops = fp16_ops
        self.faults = faults
        self.report = report
        self._origins = origins

    def original_of(self, tensor_name: str) -> str:
        """The original ``"op:i"`` an added tensor stands for (an input rounding: the TF output it
        rounds, also when it rounds a fault's or a rounding's output; an output chain: the output it
        replaces); any other name is returned as is. Never a name of an added op."""
        return self._origins.get(tensor_name, tensor_name)

    def npu_tensor(self, tensor_name: str) -> str:
        """``alias.get(tensor_name, tensor_name)``."""
        return self.alias.get(tensor_name, tensor_name)

    def __repr__(self) -> str:
        return "NumericsPlan(fp16_ops={}, faults={}, added_ops={})".format(
            len(self.fp16_ops), sorted(self.faults), len(self.added_ops))


def apply(graph: Any, fp16: bool, faults: Optional[Mapping[str, Any]], seed: int = 0) -> NumericsPlan:
    """Rewrite ``graph`` (not finalized) in place so the step computes with NPU numerics.

    ``fp16``: ops of :data:`FP16_OP_TYPES` read float16-rounded float32 inputs and their
    float32 outputs are rounded through float16, every consumer rewired to the rounded
    tensor. ``faults``: ``{op name: spec}`` (see :func:`parse_fault`); each faulted op's
    floating outputs pass through the fault and every consumer is rewired to the faulted
    tensor. ``seed`` (int in [0, 2**63)) seeds ``add_noise``. All faults are validated
    before the graph is edited: ``OptionError("faults", ...)`` for a bad spec, an op not in
    the graph, or one that cannot be faulted. ``BackendError`` when the graph is finalized or
    already rewritten. Returns the :class:`NumericsPlan`.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= _MAX_SEED:
        raise OptionError("seed", seed, "must be an int in [0, 2**63)")
    parsed = _parse_faults(faults)
    if getattr(graph, "finalized", False):
        raise BackendError("numerics.apply: the graph is finalized; it must be rewritten before the session starts")
    _check_not_rewritten(graph)
    ops = list(graph.get_operations())  # snapshot: the rewrite adds ops
    by_name = {op.name: op for op in ops}
    for fault in parsed.values():
        _check_faultable(by_name.get(fault.op), fault, graph)
    rewriter = _Rewriter(graph, seed)
    tf = _tf.tf_v1()
    with graph.as_default(), graph.control_dependencies(None):
        for op in ops:
            rounds = bool(fp16) and op.type in FP16_OP_TYPES and rewriter.can_round(op)
            fault = parsed.get(op.name)
            if rounds or fault is not None:
                with tf.device(op.device or None):
                    rewriter.rewrite(op, rounds, fault)
    if fp16:
        rewriter.skip_functions()
    return rewriter.plan(bool(fp16), parsed)


def _parse_faults(faults: Optional[Mapping[str, Any]]) -> Dict[str, Fault]:
    if faults is None:
        return {}
    if not isinstance(faults, Mapping):
        raise OptionError("faults", faults, "must be a mapping {op name: spec}")
    return {name: parse_fault(name, spec) for name, spec in faults.items()}


_NODE_SUFFIX = re.compile(r"_\d+$")


def _function_hint(graph: Any, name: str) -> str:
    """Why ``name`` is no op of the main graph when it (or its tail, ``rnn/while/lstm_cell/MatMul``
    for a body's ``lstm_cell/MatMul``) names a node of a graph function: a TF 2.x ``while_loop``/
    ``cond`` body, which the emulated NPU neither rewrites nor dumps."""
    if graph is None or not getattr(graph, "_functions", True):  # private dict of TF 1.15 and 2.x: no function
        return ""
    for function in graph.as_graph_def(add_shapes=False).library.function:
        for node in function.node_def:
            # TF 1.15 names a body's nodes with a "_0" suffix (step_matmul_0)
            if any(name == local or name.endswith("/" + local) for local in (node.name, _NODE_SUFFIX.sub("", node.name))):
                return (" (it matches {} inside graph function {}: a TF 2.x while_loop/cond body, which the "
                        "emulated NPU neither rewrites nor dumps; build the loop with "
                        "tf.compat.v1.disable_control_flow_v2() to fault it)".format(node.name, function.signature.name))
    return ""


def _check_not_rewritten(graph: Any) -> None:
    for op in graph.get_operations():
        if _SCOPE_MARK in op.name:
            raise BackendError("numerics.apply: the graph is already rewritten (op {} exists)".format(op.name))


def _check_faultable(op: Any, fault: Fault, graph: Any = None) -> None:
    entry = {fault.op: fault.spec}
    if op is None:
        hint = " (faults take op names, not tensor names)" if ":" in fault.op else _function_hint(graph, fault.op)
        raise OptionError("faults", entry, "names no op of the graph" + hint)
    if not any(_is_float(t) for t in op.outputs):
        dtypes = ", ".join(t.dtype.name for t in op.outputs) or "no outputs"
        raise OptionError("faults", entry, "op {} ({}) has no floating, non-reference output to fault "
                                           "({})".format(op.name, op.type, dtypes))


def fp16_lowering_problem(op: Any) -> Optional[str]:
    """Why an op of :data:`FP16_OP_TYPES` is not rewritten to float16 (None: it is). One rule for the
    rewrite and for the dump size estimate (:mod:`npu_dump_hook.train.sizing`), which models the
    float16 outputs without rewriting anything."""
    if _control_flow_context(op) is not None:
        return "inside a control-flow context (while/cond): rewiring there is unsafe; runs in float32"
    floats = [t for t in list(op.inputs) + list(op.outputs) if t.dtype.is_floating]
    if not any(_is_float32(t) for t in floats):
        kinds = sorted({t.dtype.base_dtype.name for t in floats})
        if kinds == ["float16"]:
            return "already computes in float16"
        return "computes in {}: allow_fp32_to_fp16 lowers float32 only".format("/".join(kinds) or "no floating type")
    return None


def _control_flow_context(op: Any) -> Any:
    """The v1 control-flow context of ``op`` (private ``Operation._control_flow_context``, TF 1.15 and 2.x)."""
    return getattr(op, "_control_flow_context", None)


def _is_float(tensor: Any) -> bool:
    dtype = tensor.dtype
    return dtype.is_floating and dtype == dtype.base_dtype  # not a ref (VariableV2's output)


def _is_float32(tensor: Any) -> bool:
    return tensor.dtype.base_dtype.name == "float32"


class _Rewriter(object):
    """Builds the rounding and fault chains; collects the plan."""

    def __init__(self, graph: Any, seed: int) -> None:
        self.graph = graph
        self.seed = seed
        self.tf = _tf.tf_v1()
        self.alias = {}  # type: Dict[str, str]
        self.origins = {}  # type: Dict[str, str]
        self.added = set()  # type: Set[str]
        self.fp16_tensors = set()  # type: Set[str]
        self.fp16_ops = set()  # type: Set[str]
        self.fp16_types = {}  # type: Dict[str, int]
        self.exact16 = set()  # type: Set[str]   tensors whose values are float16 values
        self.rounded_inputs = {}  # type: Dict[str, Any]   source tensor name -> its rounding
        self.counts = {"rounded_inputs": 0, "rounded_outputs": 0}
        self.skipped = []  # type: List[Dict[str, str]]
        self.notes = []  # type: List[Dict[str, str]]

    # -- eligibility ----------------------------------------------------------
    def can_round(self, op: Any) -> bool:
        reason = fp16_lowering_problem(op)
        if reason is not None:
            self._skip(op, reason)
            return False
        return True

    def _skip(self, op: Any, reason: str) -> None:
        self.skipped.append({"op": op.name, "type": op.type, "reason": reason})

    def skip_functions(self) -> None:
        """Report float16 op types inside graph functions (not rewritten: their bodies are FunctionDefs)."""
        if not getattr(self.graph, "_functions", True):  # private dict of TF 1.15 and 2.x: no function, no export
            return
        library = self.graph.as_graph_def(add_shapes=False).library
        for function in library.function:
            found = sorted({node.op for node in function.node_def if node.op in FP16_OP_TYPES})
            if found:
                self.skipped.append({"op": function.signature.name, "type": "function",
                                     "reason": "graph function holding {}: not rewritten, runs in float32".format(
                                         ", ".join(found))})

    # -- rewriting ----------------------------------------------------------------
    def rewrite(self, op: Any, rounds: bool, fault: Optional[Fault]) -> None:
        if rounds:
            self.fp16_ops.add(op.name)
            self.fp16_types[op.type] = self.fp16_types.get(op.type, 0) + 1
            for index, tensor in enumerate(list(op.inputs)):
                if _is_float32(tensor) and tensor.name not in self.exact16:
                    op._update_input(index, self._rounded_input(op, index, tensor))  # noqa: SLF001 - see _tf
                    self.counts["rounded_inputs"] += 1
        for index, tensor in enumerate(op.outputs):
            rounded = rounds and _is_float32(tensor)
            faulted = fault is not None and _is_float(tensor)
            if rounded:
                self.fp16_tensors.add(tensor.name)
            if not (rounded or faulted):
                continue
            if not tensor.consumers() and not faulted:
                self.notes.append({"tensor": tensor.name, "note": "no consumer: not rounded in the graph "
                                                                  "(its float16 dump gives the NPU value)"})
                continue
            self._rewrite_output(op, index, tensor, rounded, fault if faulted else None)

    def _rounded_input(self, op: Any, index: int, tensor: Any) -> Any:
        """The float16 rounding of ``tensor`` (one per source tensor, shared by its float16 consumers)."""
        known = self.rounded_inputs.get(tensor.name)
        if known is not None:
            return known
        scope = "{}{}in_{}/".format(op.name, _SCOPE_MARK, index)
        with self.tf.name_scope(scope):
            rounded = self._round(tensor)
        # the source may itself be an added tensor (the fault chain of a producer that is no float16
        # op): the rounding stands for the TF output behind it, the name the golden run has
        self._record_chain(rounded, scope, self.origins.get(tensor.name, tensor.name))
        self.rounded_inputs[tensor.name] = rounded
        self.exact16.add(rounded.name)
        return rounded

    def _rewrite_output(self, op: Any, index: int, tensor: Any, rounded: bool, fault: Optional[Fault]) -> None:
        scope = "{}{}out_{}/".format(op.name, _SCOPE_MARK, index)
        context = _control_flow_context(op)
        if context is not None:
            context.Enter()  # a TF 1.x loop body / cond branch: the fault runs there, at every iteration
        try:
            with self.tf.name_scope(scope):
                value = self._round(tensor) if rounded else tensor
                if fault is not None:
                    value = self._fault(value, fault, tensor.name)
                    if rounded:
                        value = self._round(value)
        finally:
            if context is not None:
                context.Exit()
        moved = _reroute(tensor, value, scope)
        if rounded:
            self.counts["rounded_outputs"] += 1
            self.exact16.add(value.name)
        if fault is not None and not moved:
            self.notes.append({"tensor": tensor.name, "note": "faulted output feeds nothing: only its dump shows "
                                                              "the fault"})
        self._record_chain(value, scope, tensor.name)
        self.alias[tensor.name] = value.name

    def _round(self, tensor: Any) -> Any:
        """float32 -> float16 -> float32 (round to nearest even; beyond 65504 becomes inf)."""
        tf = self.tf
        return tf.cast(tf.cast(tensor, tf.float16, name="to_fp16"), tensor.dtype.base_dtype, name="to_fp32")

    def _fault(self, value: Any, fault: Fault, tensor_name: str) -> Any:
        tf = self.tf
        dtype = value.dtype.base_dtype
        if fault.kind == "scale":
            return tf.multiply(value, tf.constant(fault.value, dtype=dtype), name="fault_scale")
        if fault.kind in ("add_noise", "nondeterministic"):
            first = self.seed if fault.kind == "add_noise" else int.from_bytes(os.urandom(7), "big")
            seed = tf.constant([first, derived_seed(tensor_name)], dtype=tf.int64, name="noise_seed")
            noise = tf.random.stateless_normal(tf.shape(value), seed=seed, stddev=fault.value, name="noise")
            if noise.dtype != dtype:
                noise = tf.cast(noise, dtype)
            return tf.add(value, noise, name="fault_add_noise")
        magnitude = tf.abs(value)
        largest = tf.greater_equal(magnitude, tf.reduce_max(magnitude), name="largest")
        bad = float("inf") if fault.kind == "overflow" else float("nan")
        filled = tf.fill(tf.shape(value), tf.constant(bad, dtype=dtype))
        return tf.where(largest, filled, value, name="fault_" + fault.kind)

    def _record_chain(self, result: Any, scope: str, original: str) -> None:
        """List the ops under ``scope`` that lead to ``result`` as added, their outputs as standing for ``original``."""
        stack = [result.op]  # type: List[Any]
        seen: Set[str] = set()
        while stack:
            op = stack.pop()
            if op.name in seen or not op.name.startswith(scope):
                continue
            seen.add(op.name)
            self.added.add(op.name)
            for out in op.outputs:
                self.origins[out.name] = original
            stack.extend(t.op for t in op.inputs)

    def plan(self, fp16: bool, faults: Dict[str, Fault]) -> NumericsPlan:
        report = {
            "fp16": fp16,
            "precision_mode": "allow_fp32_to_fp16" if fp16 else "fp32",
            "seed": self.seed,
            "fp16_op_types": dict(sorted(self.fp16_types.items())),
            "fp16_ops": len(self.fp16_ops),
            "rounded_inputs": self.counts["rounded_inputs"],
            "rounded_outputs": self.counts["rounded_outputs"],
            "added_ops": len(self.added),
            "faults": {name: fault.spec for name, fault in sorted(faults.items())},
            "notes": self.notes,
            "skipped": self.skipped,
        }
        for entry in self.skipped:
            logger.info("numerics: %s (%s) skipped: %s", entry["op"], entry["type"], entry["reason"])
        return NumericsPlan(dict(self.alias), frozenset(self.added), frozenset(self.fp16_tensors),
                            frozenset(self.fp16_ops), dict(faults), report, dict(self.origins))


def _reroute(old: Any, new: Any, own_scope: str) -> int:
    """Every consumer of ``old`` outside ``own_scope`` (the chain that computes ``new``) reads ``new``.

    Returns how many inputs moved. Uses the private ``Operation._update_input`` (TF 1.15 and
    2.x, see :mod:`npu_dump_hook._tf`).
    """
    moved = 0
    for consumer in _unique(old.consumers()):
        if consumer.name.startswith(own_scope):
            continue
        for index, tensor in enumerate(list(consumer.inputs)):
            if tensor is old or tensor.name == old.name:
                consumer._update_input(index, new)  # noqa: SLF001
                moved += 1
    return moved


def _unique(ops: Iterable[Any]) -> List[Any]:
    result, seen = [], set()  # type: List[Any], Set[str]
    for op in ops:
        if op.name not in seen:
            seen.add(op.name)
            result.append(op)
    return result
