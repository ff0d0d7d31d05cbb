"""Randomness audit and policies for the captured training step.

Random sources found in a ``tf.Graph`` (op name, type, category)::

    stateful        ops with seed/seed2 attributes: RandomUniform, RandomStandardNormal,
                    TruncatedNormal, RandomUniformInt, Multinomial, RandomShuffle,
                    RandomGamma, RandomPoisson(V2), RandomCrop, RandomShuffleQueue(V2),
                    SampleDistortedBoundingBox(V2), DropOutGenMask (npu_ops.dropout), ...
    stateless_seed  stateless random ops whose seed is a Const baked in at build time
                    (TF 2.x tf.compat.v1.layers / Keras initializers draw it from Python's
                    ``random``, so neither tf_random_seed nor op attributes pin it)
    dropout         the dropout pattern: RandomUniform -> GreaterEqual(rate) ->
                    SelectV2(mask, x * scale, 0), or x / (1 - rate) for a tensor rate (TF 2.x);
                    RandomUniform -> * (max - min) + min -> GreaterEqual(rate) -> Cast ->
                    Mul(x * scale) (TF 1.15; scale a Const, or 1 / (1 - rate) for a tensor).
                    ``rate`` may be a number, a placeholder ``keep_prob`` (``v1.nn.dropout(x,
                    keep_prob)``), ``placeholder_with_default`` or any scalar tensor
                    (``rate=1 - keep_prob``, what tf_upgrade_v2 writes)
    shuffle         ShuffleDataset(V2/V3), ShuffleAndRepeatDataset(V2)
    function_*      shuffles and stateful random ops inside functions of the graph library
                    (tf.data pipelines of make_one_shot_iterator, map functions): pinned or
                    removed in an edited copy of the function when something uses it, else
                    reported as a dead copy (see npu_dump_hook._graph_functions)

Policies (``randomness=`` of the hook):

    audit   report only.
    pin     graph-level seed := seed; every stateful op without user seeds gets
            seed := seed, seed2 := crc32(op name); every stateless seed Const is replaced
            by [seed, crc32(op name)]; shuffle seeds := (seed, crc32(op name)).
            Values depend on op names only, so two processes building the same model
            draw the same numbers. Python's ``random`` and numpy's global generator are
            seeded too, when the policy is applied (``begin()``): ``random.seed(seed)``,
            ``numpy.random.seed(seed % 2**32)``, so numpy/Python shuffles, noise and toy
            data drawn from then on repeat in every run with the same seed (draws made
            before the hook began are not affected). Report: ``host_generators``.
    strip   (default) pin, plus: dropout becomes the identity, its output equal to its
            input whatever rate it is given: the RandomUniform output is replaced by ones
            (``ones >= rate`` keeps everything for any rate < 1), and every consumer of the
            scale (``1 / keep_prob``) or divisor (``1 - rate``), forward and gradient, reads
            ones of its shape instead (``ones_like``: the shape of a placeholder
            ``keep_prob`` is known only at run time), so forward and backward stay
            consistent. The rate tensor is still computed: a placeholder ``keep_prob`` is
            fed as the script feeds it. Dataset shuffles are removed (consumers read the
            shuffle's input; ShuffleAndRepeat becomes Repeat). Random augmentation ops are
            pinned, not removed.
    error   raise RandomnessError listing the sources.

    ``audit`` and ``error`` leave Python's and numpy's generators alone (``host_generators``
    ``{"random": null, "numpy": null}``: unseeded by the hook).

Clock seeds. A user seed cannot be compared with another run's from one process, so the rule
looks at its value: an op whose ``seed`` or ``seed2`` attribute lies within the last
CLOCK_SEED_YEARS (10) years of epoch seconds (up to a day ahead) was seeded from the clock
(``int(time.time())``, directly, through ``tf.random.set_seed`` or inside a dataset map). Such
an op is reported as ``clock-seeded (not reproducible: ...)``, listed in the report's
``not_reproducible`` and logged as a warning; its seeds are kept (a false positive must not
change a user's seed). Milliseconds or finer do not survive TensorFlow's 31-bit truncation of
op seeds and are not recognisable; a deliberate seed in that range (1.48e9..1.8e9 in 2026) is
a false positive. Shuffle and stateless seeds are pinned whatever they were, so the rule
applies to stateful ops (main graph and graph functions).

A dropout inside a TF 1.x control-flow context (a recurrent dropout in a ``dynamic_rnn`` loop
body) is stripped there: its ones are made in the same context. What cannot be rewritten (a
shuffle inside a control-flow context, a dropout-shaped mask whose scale is not recognised: pinned instead) is reported with the reason under ``not_handled``. The graph is edited in
place, which TensorFlow allows until it is finalized, i.e. in ``SessionRunHook.begin``.
"""
import contextlib
import logging
import random
import time
import zlib
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from . import _tf
from ._graph_functions import rewrite_functions
from .errors import OptionError, RandomnessError
from .settings import DEFAULT_SEED, POLICIES  # one definition, with the randomness= row

__all__ = ["POLICIES", "DEFAULT_SEED", "CLOCK_SEED_YEARS", "CLOCK_SEEDED", "audit", "apply_policy", "derived_seed",
           "clock_reading", "seed_host_generators"]

logger = logging.getLogger(__name__)


STATEFUL_TYPES = frozenset(
    """RandomUniform RandomUniformInt RandomStandardNormal TruncatedNormal Multinomial
    RandomShuffle RandomGamma RandomPoisson RandomPoissonV2 RandomCrop ParameterizedTruncatedNormal
    RandomShuffleQueue RandomShuffleQueueV2 SampleDistortedBoundingBox SampleDistortedBoundingBoxV2
    DropOutGenMask DropOutGenMaskV3 RandomBinomial""".split()
)
# stateless op type -> index of its seed input
STATELESS_SEED_INPUT = {
    "StatelessRandomGetKeyCounter": 0,
    "StatelessRandomGetKeyCounterAlg": 0,
    "StatelessRandomUniform": 1,
    "StatelessRandomNormal": 1,
    "StatelessTruncatedNormal": 1,
    "StatelessRandomUniformInt": 1,
    "StatelessRandomUniformFullInt": 1,
    "StatelessMultinomial": 2,
    "StatelessRandomBinomial": 1,
    "StatelessRandomPoisson": 1,
    "StatelessRandomGammaV2": 1,
    "StatelessParameterizedTruncatedNormal": 1,
}
# shuffle dataset type -> indices of (seed, seed2) inputs
SHUFFLE_SEED_INPUTS = {
    "ShuffleDataset": (2, 3),
    "ShuffleDatasetV3": (2, 3),
    "ShuffleAndRepeatDataset": (2, 3),
    "ShuffleAndRepeatDatasetV2": (2, 3),
    "ShuffleDatasetV2": (),
}

#: The op types :meth:`_Rewriter._visit` acts on (every other op is passed over without a call).
_VISITED_TYPES = STATEFUL_TYPES | frozenset(STATELESS_SEED_INPUT) | frozenset(SHUFFLE_SEED_INPUTS)


def derived_seed(op_name: str) -> int:
    """A stable, non-zero 31-bit seed from an op name (same in every process)."""
    return (zlib.crc32(op_name.encode("utf-8")) & 0x7FFFFFFF) or 1


#: A user seed within this many years before the clock (up to a day after it) reads as
#: ``int(time.time())``: a seed that changes with every run.
CLOCK_SEED_YEARS = 10
_CLOCK_PAST_SECONDS = CLOCK_SEED_YEARS * 365 * 86400
_CLOCK_FUTURE_SECONDS = 86400
#: How a clock seed's action starts (report key ``not_reproducible``).
CLOCK_SEEDED = "clock-seeded"


def clock_reading(seeds: Iterable[int], now: Optional[float] = None) -> Optional[str]:
    """``"seed2=1800000000 is the clock time 2027-01-15 08:00:00 UTC"`` when one of ``(seed, seed2)``
    is epoch seconds of the last CLOCK_SEED_YEARS years (``now``: default the clock), else None."""
    now = time.time() if now is None else now
    for name, value in zip(("seed", "seed2"), seeds):
        if now - _CLOCK_PAST_SECONDS <= value <= now + _CLOCK_FUTURE_SECONDS:
            return "{}={} is the clock time {} UTC".format(
                name, value, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(value)))
    return None


def _clock_action(seeds: Iterable[int], what_happened: str) -> Optional[str]:
    """The action of a source whose ``seeds`` hold a clock reading, else None."""
    reading = clock_reading(seeds)
    return None if reading is None else "{} (not reproducible: {}; {})".format(CLOCK_SEEDED, reading, what_happened)


def seed_host_generators(seed: int) -> Dict[str, Optional[int]]:
    """Seed Python's ``random`` and numpy's global generator from ``seed``; the seed each got.

    numpy takes 0 <= seed < 2**32, so it gets ``seed % 2**32``. numpy is imported here, not at
    module import: ``import npu_dump_hook`` stays light.
    """
    import numpy

    random.seed(seed)
    numpy_seed = seed % 2 ** 32
    numpy.random.seed(numpy_seed)
    return {"random": seed, "numpy": numpy_seed}


def _entry(op: Any, category: str, action: str) -> Dict[str, str]:
    return {"op": op.name, "type": op.type, "category": category, "action": action}


def audit(graph: Any) -> List[Dict[str, str]]:
    """Every random source of ``graph``, with ``action`` "reported"."""
    return _Rewriter(graph, "audit", DEFAULT_SEED).run()["sources"]


def apply_policy(graph: Any, policy: str, seed: int = DEFAULT_SEED) -> Dict[str, Any]:
    """Apply ``policy`` to ``graph`` in place and return the randomness report.

    The report: ``{"policy", "seed", "sources": [{op, type, category, action}], "not_handled":
    [...], "not_reproducible": [...], "host_generators": {"random", "numpy"}}`` where
    ``not_handled`` lists what could not be pinned or removed, ``not_reproducible`` the sources
    whose user seed is a clock reading (see :func:`clock_reading`), and ``host_generators`` the
    seed Python's ``random`` and numpy's global generator got (null: left as they were).
    """
    if policy not in POLICIES:
        raise OptionError("randomness", policy, "must be one of " + "|".join(POLICIES))
    report = _Rewriter(graph, policy, seed).run()
    pin = policy in ("pin", "strip")
    report["host_generators"] = seed_host_generators(seed) if pin else {"random": None, "numpy": None}
    if not pin:
        logger.info("randomness=%s: Python's random and numpy's global generator are left unseeded", policy)
    if policy == "error" and report["sources"]:
        listing = ", ".join("{} ({})".format(s["op"], s["type"]) for s in report["sources"])
        raise RandomnessError(
            "randomness='error': the graph has {} random source(s): {}".format(len(report["sources"]), listing),
            ops=[(s["op"], s["type"]) for s in report["sources"]],
        )
    return report


class _Rewriter:
    """One pass over a graph: finds random sources and edits them as the policy says."""

    def __init__(self, graph: Any, policy: str, seed: int) -> None:
        self.graph = graph
        self.policy = policy
        self.seed = seed
        self.pin = policy in ("pin", "strip")
        self.strip = policy == "strip"
        self.sources = []  # type: List[Dict[str, str]]
        self._stripped_randoms = set()  # RandomUniform ops already turned into ones

    def run(self) -> Dict[str, Any]:
        tf = _tf.tf_v1()
        if self.pin:
            self.graph.seed = self.seed
        ops = list(self.graph.get_operations())  # snapshot: we add ops while rewriting
        # Each op's type read once (on TF 1.15 every read is a C API call; up to four per op here).
        # An op's type never changes, and the ops the strip adds are not in the snapshot.
        types = [op.type for op in ops]
        with self.graph.as_default(), tf.name_scope("npu_dump_hook_randomness"):
            if self.strip:
                for op, op_type in zip(ops, types):
                    if op_type == "RandomUniform":
                        self._strip_dropout(op)
            for op, op_type in zip(ops, types):
                if op_type in _VISITED_TYPES:
                    self._visit(op)
        self._visit_functions()
        not_handled = [s for s in self.sources if s["action"].startswith("not handled")]
        not_reproducible = [s for s in self.sources if s["action"].startswith(CLOCK_SEEDED)]
        for s in not_handled + not_reproducible:
            logger.warning("randomness: %s (%s): %s", s["op"], s["type"], s["action"])
        return {"policy": self.policy, "seed": self.seed, "sources": self.sources, "not_handled": not_handled,
                "not_reproducible": not_reproducible}

    # -- per-op handling ----------------------------------------------------
    def _visit(self, op: Any) -> None:
        if op.type in STATEFUL_TYPES and op.name not in self._stripped_randoms:
            self.sources.append(_entry(op, "stateful", self._pin_attrs(op)))
        elif op.type in STATELESS_SEED_INPUT:
            self.sources.append(_entry(op, "stateless_seed", self._pin_stateless(op)))
        elif op.type in SHUFFLE_SEED_INPUTS:
            if not op.outputs[0].consumers():  # e.g. the main-graph twin of a make_one_shot_iterator pipeline
                dead = "dead copy: nothing reads it"
                self.sources.append(_entry(op, "shuffle", dead + "; left as is" if self.pin else "reported (" + dead + ")"))
                return
            self.sources.append(_entry(op, "shuffle", self._handle_shuffle(op)))

    def _pin_attrs(self, op: Any) -> str:
        seeds = (op.get_attr("seed"), op.get_attr("seed2"))
        clock = _clock_action(seeds, "kept" if self.pin else "reported")
        if clock is not None:
            return clock
        if not self.pin:
            return "reported (seed={}, seed2={})".format(*seeds)
        if seeds != (0, 0):
            return "kept user seeds (seed={}, seed2={})".format(*seeds)
        attr = _tf.attr_value_pb2().AttrValue
        op._set_attr("seed", attr(i=self.seed))
        op._set_attr("seed2", attr(i=derived_seed(op.name)))
        return "pinned (seed={}, seed2={})".format(self.seed, derived_seed(op.name))

    def _pin_stateless(self, op: Any) -> str:
        index = STATELESS_SEED_INPUT[op.type]
        source = op.inputs[index]
        if not self.pin:
            return "reported (seed from {})".format(source.op.name)
        if source.op.type != "Const":
            return "not handled: seed comes from {} ({}), not a constant".format(source.op.name, source.op.type)
        tf = _tf.tf_v1()
        value = [self.seed, derived_seed(op.name)]
        op._update_input(index, tf.constant(value, dtype=source.dtype, name="seed"))
        return "pinned (seed={} replaces the build-time constant)".format(value)

    def _handle_shuffle(self, op: Any) -> str:
        if self.strip and op._control_flow_context is None:
            return self._remove_shuffle(op)
        indices = SHUFFLE_SEED_INPUTS[op.type]
        if not self.pin:
            return "reported"
        if not indices:
            return "not handled: {} takes its seeds from a seed generator".format(op.type)
        tf = _tf.tf_v1()
        seed_index, seed2_index = indices
        op._update_input(seed_index, tf.constant(self.seed, dtype=op.inputs[seed_index].dtype, name="seed"))
        op._update_input(seed2_index, tf.constant(derived_seed(op.name), dtype=op.inputs[seed2_index].dtype, name="seed2"))
        return "pinned (seed={}, seed2={})".format(self.seed, derived_seed(op.name))

    def _remove_shuffle(self, op: Any) -> str:
        upstream = op.inputs[0]
        if op.type.startswith("ShuffleAndRepeat"):
            upstream = _tf.repeat_dataset(
                upstream, op.inputs[4], output_types=op.get_attr("output_types"),
                output_shapes=op.get_attr("output_shapes"), name=op.name.split("/")[-1] + "_unshuffled",
            )
        replaced = _reroute(op.outputs[0], upstream)
        return "removed ({} consumer(s) now read {})".format(replaced, upstream.op.name)

    def _strip_dropout(self, random_op: Any) -> None:
        pattern = _match_dropout(random_op)
        if pattern is None:
            return
        self._stripped_randoms.add(random_op.name)
        if pattern["scale"] is None:
            self.sources.append(_entry(random_op, "dropout", "not handled: dropout whose scale is not recognised, "
                                       "so it cannot be made the identity; " + self._pin_attrs(random_op)))
            return
        tf = _tf.tf_v1()
        with _in_context_of(random_op):  # a recurrent dropout in a TF 1.x loop body: its ones live there too
            ones = tf.fill(random_op.inputs[0], tf.constant(1, dtype=random_op.outputs[0].dtype), name="keep_all")
        _reroute(random_op.outputs[0], ones)
        scale = pattern["scale"]
        with _in_context_of(scale.op):
            _replace_with_ones(scale, name="unit_" + pattern["role"])
        where = " inside a control-flow context" if random_op._control_flow_context is not None else ""
        self.sources.append(_entry(random_op, "dropout", "stripped{} (mask keeps all, {} {} -> 1)".format(
            where, pattern["role"], scale.op.name)))

    def _visit_functions(self) -> None:
        """Random sources inside graph functions (tf.data, make_one_shot_iterator): see _graph_functions."""
        self.sources.extend(rewrite_functions(
            self.graph, STATEFUL_TYPES, frozenset(SHUFFLE_SEED_INPUTS) - {"ShuffleAndRepeatDataset",
                                                                          "ShuffleAndRepeatDatasetV2"},
            pin=self.pin, strip=self.strip, seed=self.seed, derive=derived_seed,
            clock=_clock_action))


@contextlib.contextmanager
def _in_context_of(op: Any) -> Iterator[None]:
    """Ops made here join ``op``'s TF 1.x control-flow context (``tf.while_loop`` body, ``tf.cond``
    branch; private ``Operation._control_flow_context``), as an op made there by the script would."""
    context = op._control_flow_context
    if context is None:
        yield
        return
    context.Enter()
    try:
        yield
    finally:
        context.Exit()


def _consumers(tensor: Any) -> Iterable[Any]:
    return tensor.consumers()


def _reroute(old: Any, new: Any, consumers: Optional[List[Any]] = None) -> int:
    """Make every consumer of ``old`` (or those of ``consumers``) read ``new`` instead; returns how
    many inputs moved."""
    moved = 0
    for consumer in list(_consumers(old)) if consumers is None else consumers:
        if consumer is new.op:
            continue
        for index, tensor in enumerate(list(consumer.inputs)):
            if tensor is old:
                consumer._update_input(index, new)
                moved += 1
    return moved


def _replace_with_ones(tensor: Any, name: str) -> int:
    """Every consumer of ``tensor`` (forward and gradient) reads ones of its shape and dtype instead.

    ``ones_like``: the shape may be unknown until run time (a placeholder ``keep_prob``), and a
    broadcast ``x * ones`` or ``x / ones`` keeps the shape the original gave. The consumers are
    taken before the ones exist: ``ones_like`` itself may read ``tensor``'s shape.
    """
    consumers = list(_consumers(tensor))
    return _reroute(tensor, _tf.tf_v1().ones_like(tensor, name=name), consumers)


def _match_dropout(random_op: Any) -> Optional[Dict[str, Any]]:
    """The dropout pattern around a RandomUniform op, or None.

    TF 2.x: SelectV2(GreaterEqual(random, rate), scaled, zeros), where ``scaled`` is
    Mul(x, scale) with a Const scale (a number ``rate``), or RealDiv(x, Sub(1, rate)) (a tensor
    ``rate``: ``rate=1 - keep_prob``, ``v1.nn.dropout(x, keep_prob)``).
    TF 1.15: Mul(Mul(x, scale), Cast(GreaterEqual(random * (max - min) + min, rate))), scale a
    Const or ``RealDiv(1, 1 - rate)``. The scale (or divisor) is rerouted whatever computes it:
    with the mask keeping everything, only a scale of 1 makes dropout the identity.

    Returns ``{"compare", "scale", "role"}`` (role "scale" or "divisor"); ``scale`` is None when
    a mask is built the dropout way but what scales ``x`` is not recognised.
    """
    for compare in _through_affine(random_op.outputs[0]):
        if compare.type != "GreaterEqual":
            continue
        candidates = _masked_operands(compare)
        for scaled in candidates:
            found = _scale_of(scaled, _scope(compare))
            if found is not None:
                return {"compare": compare, "scale": found[0], "role": found[1]}
        if candidates:
            return {"compare": compare, "scale": None, "role": None}
    return None


def _masked_operands(compare: Any) -> List[Any]:
    """What the mask ``compare`` selects or multiplies: SelectV2's kept operand, or every operand
    a Cast of the mask multiplies (the forward Mul, and in TF 1.15 its gradients too)."""
    operands = []  # type: List[Any]
    for user in _consumers(compare.outputs[0]):
        if user.type == "SelectV2":
            operands.append(user.inputs[1])
        elif user.type == "Cast":
            for mul in _consumers(user.outputs[0]):
                if mul.type == "Mul":
                    operands.extend(t for t in mul.inputs if t is not user.outputs[0])
    return operands


def _scale_of(scaled: Any, scope: str) -> Optional[Tuple[Any, str]]:
    """``(scale tensor, role)`` when ``scaled`` is dropout's ``x * scale`` or ``x / (1 - rate)``.

    Made by the same dropout call, so in its name scope (gradient Muls are not)."""
    expected = {"Mul": (_SCALE_TYPES, "scale"), "RealDiv": (("Sub",), "divisor")}.get(scaled.op.type)
    if expected is None or _scope(scaled.op) != scope:
        return None
    operand_types, role = expected
    operand = scaled.op.inputs[1]
    return (operand, role) if operand.op.type in operand_types else None


# What computes dropout's 1 / (1 - rate): a Const (TF 2.x) or a RealDiv (TF 1.15).
_SCALE_TYPES = frozenset(("Const", "RealDiv", "Reciprocal"))
_AFFINE_TYPES = frozenset(("Mul", "Add", "AddV2"))


def _scope(op: Any) -> str:
    return op.name.rpartition("/")[0]


def _through_affine(tensor: Any, hops: int = 2) -> List[Any]:
    """Consumers of ``tensor``, looking through up to ``hops`` Mul/Add ops (``random_uniform``'s
    ``* (max - min) + min`` in TF 1.15); the affine ops themselves are not returned."""
    found, frontier = [], [tensor]  # type: List[Any], List[Any]
    for _ in range(hops + 1):
        following = []
        for current in frontier:
            for consumer in _consumers(current):
                if consumer.type in _AFFINE_TYPES:
                    following.append(consumer.outputs[0])
                else:
                    found.append(consumer)
        frontier = following
    return found
