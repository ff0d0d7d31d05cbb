"""``NpuDumpHook``: one training iteration, dumped, with randomness removed.

The hook decides *when*; the work is delegated. Its keywords are checked by the settings table
(:func:`npu_dump_hook.settings.check_hook_keywords`: each keyword's rule, then the combination
rules) and turned into its collaborators by :mod:`npu_dump_hook.train.assembly`: the dump run
(backend, capture, initial state, emulated dump, tf/graph.pbtxt) :mod:`npu_dump_hook.train.dump_run`,
the golden run (restore from the NPU bundle, input replay, fingerprint comparison,
``on_mismatch``) :mod:`npu_dump_hook.train.golden`, step counting :mod:`npu_dump_hook.train.steps`,
the size check :mod:`npu_dump_hook.train.sizing`, the fingerprints and kept inputs
:mod:`npu_dump_hook.train.state`, the bundle's destination :mod:`npu_dump_hook.train.output`,
failure handling :mod:`npu_dump_hook.train.guard`. run.json is frozen by
:mod:`npu_dump_hook.train.record`, the end-of-run messages are :mod:`npu_dump_hook.train.report`,
randomness :mod:`npu_dump_hook.determinism`, config :mod:`npu_dump_hook.config`. Each training
step is walked once (:class:`~npu_dump_hook.train.walk.StepWalk`): the detector, the capture and
the batch fingerprints share it.

Call order under ``MonitoredSession`` / ``Estimator.train(hooks=[hook])``::

    hook = NpuDumpHook(options)          # keywords checked (settings table), collaborators
                                         #   assembled (train/assembly.py), folders checked:
                                         #   before any training
    hook.begin()                         # graph built, not yet finalized:
                                         #   note wall-clock start (tells this run's dump
                                         #   folders from stale ones), point DUMP_GRAPH_PATH at
                                         #   the run folder, apply the randomness policy (may
                                         #   edit the graph), keep the TF GraphDef (run
                                         #   folder/tf/graph.pbtxt), create the initial-state
                                         #   Saver, the golden run's restorer, the capture
    session created; variables initialised or restored
    hook.after_create_session(session, coord)   # read global_step before training
    while not stop requested:
        hook.before_run(run_context)     # the run's one walk: a training step? At the captured
                                         #   step: take in what a plain session built late,
                                         #   check the dump's size (refused: nothing left
                                         #   behind), golden run: feed the NPU bundle's kept
                                         #   inputs (input replay), restore its checkpoint; add
                                         #   the batch tensors to the fetches, save the
                                         #   variables (run folder/init/) so a golden run can
                                         #   start from identical weights, capture; read and
                                         #   hash the variables (state fingerprints)
        session.run(train_op)
        hook.after_run(run_context, run_values)  # count; hash the batch (NPU run: keep its values
                                         #   in {run folder}/inputs); write the capture and the
                                         #   emulated dump; golden run: compare with the NPU
                                         #   bundle; request_stop() after max_steps
    hook.end(session)                    # read global_step, freeze run.json (train/record.py),
                                         #   log the summary, write the bundle, announce it

Ending early: when the input runs out (``OutOfRangeError``) the monitored
session ends normally and ``end()`` still runs with the steps done so far.
Any other exception propagates and ``end()`` is *not* called (TensorFlow's
contract); the run folder then holds what was written up to that point and no
summary.

Failures of the hook's own work (``strict=True``, the default, vs ``strict=False``)::

    failure class                               strict=True               strict=False
    options / config / randomness="error"       raised at construction or begin(), before training
    initial-state checkpoint (before_run)       raised                    logged; no init/ in the bundle
    capture / emulated dump of a step           raised                    logged; training continues
    run.json, collection, bundle writing        raised                    logged; training code returns
    golden run, on_mismatch="error":
      checkpoint names/shapes differ            raised in begin(), before training (both)
      fingerprints differ after the step        run.json written, no      logged; no bundle
                                                bundle, raised in end()

Raised errors are the package's own (an ``OSError`` becomes a :class:`BundleError` naming the
path and what was being done); every failure is also listed in ``hook.failures`` and in
``run.json`` (``failures``). A failed capture step leaves no scratch folder, renames a
partial golden folder to ``golden.incomplete`` (never bundled as golden) and leaves
:data:`~npu_dump_hook.constants.INCOMPLETE_STEP_MARKER` in a partly written emulated step
folder, which collection refuses.

The golden run (``backend="golden", initial_state=NPU_BUNDLE``, typically on a CPU/GPU
machine, same script and data): no dump; the captured step is the NPU bundle's
(``run.captured_step``), the variables are restored from its ``data/init/`` checkpoint right
before that step (names and shapes must match the graph's global variables, else
:class:`~npu_dump_hook.errors.FingerprintMismatchError` in ``begin()``), the golden tensors are
captured, and the run's state and batch fingerprints (:mod:`npu_dump_hook.train.fingerprints`) are
compared with the NPU bundle's. A difference fails the run before its bundle is written
(``on_mismatch="error"``: run.json records it, ``end()`` raises the error naming the variables or
inputs and the likely cause) or is recorded as a warning (``on_mismatch="warn"``). The golden
bundle records ``backend: "reference"`` (the bundle format's name of the golden backend), ``data/golden/`` and ``golden_for`` (docs/bundle-format.md).

Online inference (``mode="infer"``, or ``"auto"`` in a script that built no training op; see
:mod:`npu_dump_hook.train.inference`): the iteration is the first run of the model on an input
batch, e.g. ``estimator.predict(input_fn, hooks=[hook])`` (its generator ends after the dumped
batch), ``estimator.evaluate(..., hooks=[hook])`` or an ``NpuDumpSession`` around an inference
loop; bundle.json then says ``run.mode: "infer"``.

In a training script only training is dumped: give the hook to ``estimator.train(hooks=...)`` or, with
``tf.estimator.train_and_evaluate``, to ``TrainSpec(hooks=...)`` only, never to
``EvalSpec``. On a real NPU the dump options live in the session config, so an
evaluation session built from the same ``RunConfig`` would dump as well; the
Ascend guide advises against training and evaluating in one script for that reason.
A hook instance serves one training run: a second ``begin()`` raises.

The run folder layout is drawn in :mod:`npu_dump_hook.run_record`; at ``end()`` the hook
freezes a :class:`~npu_dump_hook.run_record.RunRecord` (:func:`npu_dump_hook.train.record.freeze`),
writes ``run.json`` from it and hands it to :func:`npu_dump_hook.collect.collect_run` (through
:class:`~npu_dump_hook.train.output.BundleOutput`). Which backend writes the dump is an object
(:mod:`npu_dump_hook.backends`), asked, never switched on.
"""
import logging
import os
import time
from typing import Any, Dict, Mapping, Optional, Sequence  # noqa: F401 (type comments)

from . import _tf, settings
from ._inert import printable
from .determinism import apply_policy
from .errors import NpuDumpError
from .options import DumpOptions
from .run_record import RunRecord, rank_and_device
from .train.assembly import DEFAULT_OUTPUT_DIR, assemble
from .train.collector import collector_paused
from .train.golden_layer import golden_of_dump_layer
from .train.golden_stats import golden_statistics
from .train.late import LateGraph
from .train.record import freeze
from .train.report import announce, log_summary, watch_never_began
from .train.steps import read_global_step
from .train.walk import GraphIndex

__all__ = ["NpuDumpHook", "DEFAULT_OUTPUT_DIR", "rank_and_device"]

logger = logging.getLogger(__name__)


def _delegate(part: str, name: str, doc: str) -> property:
    """A read-only attribute of the hook that one of its collaborators holds."""
    return property(lambda self: getattr(getattr(self, part), name), doc=doc)


class NpuDumpHook(_tf.tf_v1().train.SessionRunHook):
    """Dump one training iteration: inject nothing into the graph's math, stop after ``max_steps``.

    Args:
        options: a :class:`DumpOptions`; ``None`` reads ``NPU_DUMP_*`` variables, and when
            none is set dumps tensors into ``{run folder}/dump``.
        max_steps: training steps this run may take before ``request_stop()``, whatever the
            script asked for. Default: 1, or as many as ``dump_step`` needs (``"0|5|10"``
            runs 11 steps and dumps three); a value too small for ``dump_step`` is an
            OptionError before training.
        randomness: ``audit``, ``pin``, ``strip`` (default) or ``error``; see
            :mod:`npu_dump_hook.determinism`.
        seed: the seed ``pin``/``strip`` derive every op seed from.
        output_dir: where the run folder is created (default ``./npu_dump_hook_out``).
        save_initial_state: save the variables before the captured step (turn off for
            models too large to checkpoint twice).
        backend: ``"auto"`` (default: ``"npu"`` when npu_bridge imports, where real GE writes
            the dump and the hook only configures and collects; else ``"emulated"``),
            ``"npu"``, ``"emulated"``, ``"golden"`` (alias ``"reference"``; the golden run: no dump, golden tensors
            only), or a configured backend object.
        reference: capture the golden (CPU/GPU) tensors into ``{run folder}/golden``;
            default (None): on with the golden backend and with an emulated backend that
            computes CPU numerics (``golden_in_run``), off on an NPU.
        emulate_precision: ``"fp32"`` (exact CPU values) or ``"fp16"`` (emulated backend only).
        collect: at ``end()``, locate this run's Build graph and dump folder and write a bundle.
        bundle_dir: where bundles go (default ``{output_dir}/bundles``): ``{bundle_dir}/{run
            name}``, or ``{bundle_dir}/rank_{RANK_ID}/{run name}`` plus a shared ``index.json``
            when RANK_ID is set, so the ranks of one job share one root.
        strict: raise when the hook's own work fails (default, so CI jobs fail loudly); with
            ``strict=False`` the error is logged and training code carries on (module doc).
        verbose: show the one summary line at the end (bundle, steps, coverage, warnings; with
            NPU numerics, how to make the golden run). It is logged at INFO on the
            ``npu_dump_hook.hook`` logger, never as a warning; with True (default) it is also
            written to stderr once when no handler would show that INFO record (a plain script),
            unless the logger is set quieter than WARNING. False: only the INFO record.
        ranks: ranks that dump (RANK_ID); others run their step untouched. Default: every rank.
        emulate_profile: emulated backend: ``"exact"`` (fp32, the default) or ``"ascend"`` (NPU
            numerics in the graph, GE fusion, device formats); see :class:`EmulatedNpu`.
        faults: emulated backend: ``{"op name": "scale=1.05" | "add_noise=1e-2" | "overflow" |
            "nan"}``, kernel faults injected into the emulated run. With ``"ascend"`` or any
            fault the run computes with NPU numerics, so it takes no golden capture
            (``reference=True`` is then an OptionError): make the golden in a second run.
        initial_state: golden run: the NPU bundle (folder, ``.tar`` or ``.tar.gz``) this run
            reproduces; implies ``backend="golden"`` (``"auto"`` becomes it; another backend
            is an OptionError). Its ``data/init/`` checkpoint is restored right before its
            captured step, which this run captures (``max_steps`` defaults to that step + 1).
        restore_initial_state: golden run: restore the NPU bundle's checkpoint (default); False
            only compares (the script restores the state itself, e.g. from a model_dir).
        on_mismatch: golden run: ``"error"`` (default: fingerprints that differ from the NPU
            bundle's fail the run before its bundle is written) or ``"warn"`` (written, with the
            differences in ``warnings`` and ``golden_for``).
        max_input_bytes: the most bytes of the captured step's input values (fed values, iterator,
            queue and py_func outputs) the bundle keeps in ``data/inputs/`` for the golden run's
            replay (default 256 MiB); above it only their sha256 is kept, with a bundle warning.
        replay_inputs: golden run: feed the NPU bundle's kept input values into the same tensors
            at its captured step (default), so the step sees the NPU step's batch whatever made
            it; False: the script makes its own batch (the fingerprints say whether it matches).
        graph_keyword: an op name that only the training graph contains (graph selection).
        link, checksum, archive: passed to the bundle writer (``auto``/``hardlink``/``copy``;
            ``sha256``/``none``; None/``tar``/``tar.gz``).
        force: replace an existing bundle at the destination (never needed for reruns: each
            run has its own bundle folder, also under ``rank_{RANK_ID}``).
    """

    def __init__(self, options: Optional[DumpOptions] = None, *, max_steps: Optional[int] = None,
                 randomness: str = "strip", seed: int = settings.DEFAULT_SEED, output_dir: Optional[str] = None,
                 save_initial_state: bool = True, backend: Any = "auto", reference: Optional[bool] = None,
                 emulate_precision: str = "fp32", collect: bool = True, bundle_dir: Optional[str] = None,
                 strict: bool = True, verbose: bool = True, ranks: Optional[Sequence[int]] = None,
                 graph_keyword: Optional[str] = None, link: str = "auto", checksum: str = "sha256",
                 archive: Optional[str] = None, force: bool = False, emulate_profile: Optional[str] = None,
                 faults: Optional[Mapping[str, str]] = None, initial_state: Optional[str] = None,
                 restore_initial_state: bool = True, on_mismatch: str = "error",
                 max_input_bytes: int = settings.DEFAULT_MAX_INPUT_BYTES, replay_inputs: bool = True,
                 mode: str = "auto", max_dump_size: Any = None) -> None:
        # The keywords as called: the settings table checks them, the assembly builds the parts from them.
        keywords = {name: value for name, value in locals().items() if name in settings.HOOK_KEYWORDS}
        settings.check_hook_keywords(keywords)
        parts = assemble(options, keywords)
        self.facts, self.layout, self.golden, self.dump, self.steps = (parts.facts, parts.layout, parts.golden,
                                                                       parts.dump, parts.steps)
        self.output, self.sizes, self.prints, self.guard = parts.output, parts.sizes, parts.prints, parts.guard
        self.verbose, self.randomness, self.seed, self.graph_keyword = verbose, randomness, seed, graph_keyword
        self.bundle, self.record, self.summary = None, None, {}  # type: Any, Optional[RunRecord], Dict[str, Any]
        #: Set by NpuDumpSession: the graph stays editable after begin() (train/late.py).
        self._editable_graph = False
        self._late = None  # type: Optional[LateGraph]
        #: Warn at interpreter exit when this hook never began (False: the runner holds it for a
        #: session that may never train, and says itself when nothing trained).
        self.warn_if_never_began = True
        watch_never_began(self)

    # -- what the collaborators hold, under the names tests, session.py and runner.py use ----------
    options = _delegate("dump", "options", "The :class:`DumpOptions` this run dumps with.")
    backend = _delegate("dump", "backend", "The backend object (:mod:`npu_dump_hook.backends`).")
    backend_name = _delegate("dump", "backend_name", "The backend's name, ``none`` on a rank that does not dump.")
    golden_only = _delegate("dump", "golden_only", "The golden backend: no dump, golden tensors only.")
    dumping = _delegate("dump", "dumping", "This rank dumps (``ranks``).")
    reference = _delegate("dump", "reference", "The golden tensors are captured into ``golden_dir``.")
    golden_dir = _delegate("dump", "golden_dir", "``{run folder}/golden`` when ``reference``, else None.")
    save_initial_state = _delegate("dump", "save_initial", "The variables are saved before the captured step.")
    _capture = _delegate("dump", "capture", "The TensorCapture (None when nothing is captured).")
    max_steps = _delegate("steps", "max_steps", "Training steps before ``request_stop()``.")
    captured_step = _delegate("steps", "captured_step", "The local step (0-based) dumped or reproduced.")
    counted_steps = _delegate("steps", "counted_steps", "The training steps counted (also in run.json).")
    skipped_runs = _delegate("steps", "skipped_runs", "Runs that were not training steps (also in run.json).")
    _steps_run = _delegate("steps", "steps_run", "Training steps run so far.")
    target = _delegate("golden", "target", "Golden run: the NPU bundle this run reproduces (None otherwise).")
    on_mismatch = _delegate("golden", "on_mismatch", "Golden run: ``error`` or ``warn``.")
    restore_initial_state = _delegate("golden", "restore_initial_state", "Golden run: restore its checkpoint.")
    warnings = _delegate("golden", "warnings", "What the bundle's ``warnings`` must carry.")
    strict = _delegate("guard", "strict", "Raise when the hook's own work fails.")
    failures = _delegate("guard", "failures", "What failed in the hook's own work: ``{doing, error}``.")
    run_dir = _delegate("layout", "root", "This run's folder, ``{output_dir}/{time}_{pid}[_rank{RANK_ID}]``.")
    bundle_dir = _delegate("output", "bundle_dir", "Where bundles go (default ``{output_dir}/bundles``).")
    collect = _delegate("output", "collect", "A bundle is written at ``end()`` (False on a rank that does not dump).")
    started = _delegate("facts", "started", "Wall-clock time (epoch seconds) of ``begin()``; dump folders older "
                                            "than this are stale.")

    @property
    def output_dir(self) -> str:
        """Where run folders go (absolute; default ``./npu_dump_hook_out``)."""
        return os.path.dirname(self.run_dir)

    # -- SessionRunHook -------------------------------------------------------------------------
    def begin(self) -> None:
        if self.started is not None:
            raise NpuDumpError("NpuDumpHook serves one training run; create a new hook for another run")
        self.facts.started = time.time()
        tf = _tf.tf_v1()
        graph = tf.get_default_graph()
        os.makedirs(self.run_dir, exist_ok=True)
        self.dump.apply_graph_env()
        try:
            self._begin_run(tf, graph)
        except BaseException:
            self.dump.end()  # no end() follows a failed begin(): the process's next run gets its own graph folder
            raise

    def _begin_run(self, tf: Any, graph: Any) -> None:
        facts = self.facts
        facts.randomness = apply_policy(graph, self.randomness, self.seed)
        facts.global_step_tensor = tf.train.get_global_step(graph)
        index = GraphIndex(graph)  # one index of the graph's edges: the detector's and the capture's
        facts.tf_op_names = [index.name(op) for op in graph.get_operations()]  # kept: the capture reads them again
        self.steps.begin(graph, index)
        self.dump.check_graph(graph)
        # The model graph as trained, before the hook adds its own Saver and capture ops.
        self.dump.write_model_graph(self.dump.model_graph_def(graph, index.name), self.guard)
        variables = list(tf.global_variables())
        self.prints.begin(variables)
        self.dump.begin(variables)
        self.golden.begin(variables, self.layout.target_scratch_dir, self.guard, late=self._editable_graph)
        self.dump.begin_backend(graph, facts.ids["device_id"], index, editable=self._editable_graph)
        self._late = LateGraph(graph, variables, facts.tf_op_names)
        logger.info(
            "NpuDumpHook: backend %s%s, run folder %s, randomness=%s (%d source(s)), dumping step %d of at most %d",
            self.backend_name, " + reference" if self.reference else "", self.run_dir, self.randomness,
            len(facts.randomness["sources"]), self.captured_step, self.max_steps,
        )

    def _take_in_late(self) -> None:
        """Captured step: what a plain session's script built after begin() (train/late.py) joins
        the initial state, the state fingerprints, the golden restore, tf/graph.pbtxt and the
        randomness report."""
        late = self._late
        if late is None:
            return
        grown = late.grown()
        variables = late.variables() if grown else None
        if variables is not None:
            self.prints.begin(variables)
            self.dump.begin(variables)
        self.golden.catch_up(variables or late.begun, self.guard)
        if not grown:
            return
        self.dump.write_model_graph(late.graph_def(), self.guard)
        added = late.randomness(self.facts.randomness)
        if added:
            logger.warning("NpuDumpHook: %d random source(s) built after the hook began, not pinned (input replay "
                           "gives a golden run their values): %s", len(added),
                           ", ".join("{} ({})".format(s["op"], s["type"]) for s in added))

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.facts.global_step_before = read_global_step(self.facts.global_step_tensor, session)
        self.facts.session_config = _tf.session_config_of(session)
        self.dump.session_started()

    def before_run(self, run_context: Any) -> Any:
        walk = self.steps.start_run(run_context)  # the step's one walk; None: not a training step
        if walk is None:
            return None
        step, facts = self.steps.steps_run, self.facts
        if not step and facts.global_step_before is None:  # initialized only now
            facts.global_step_before = read_global_step(facts.global_step_tensor, run_context.session)
        captured = self.steps.at_captured_step and self.dumping
        if captured:
            self._take_in_late()
            self.sizes.before_step(walk, run_context, self.dump, self.steps, self.guard)
        feeds = self.golden.replay_feeds(walk, run_context, self.guard) if captured else {}
        fetches = self._before_captured_step(run_context, walk, step) if captured else {}
        capture = self.dump.capture_args(run_context, step, self.captured_step, walk,
                                         self.prints.reader if captured else None, self.guard)
        if captured:  # the state the capture's read took (each variable read once), else read now
            self.prints.read_state(run_context.session, step, self.guard)
        return _run_args(fetches, capture, feeds)

    def _before_captured_step(self, run_context: Any, walk: Any, step: int) -> Dict[str, Any]:
        """Golden run: restore (after the replay's feeds are prepared); then the batch tensors to
        fetch with the step and the initial-state checkpoint."""
        self.golden.restore(run_context.session, self.guard)
        batch = self.prints.batch_fetches(walk, step, self.guard)
        self.dump.save_initial_state(run_context.session, self.guard)
        return {"batch": batch} if batch else {}

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if not self.steps.counting:
            return  # not a training step: neither counted nor captured
        step, captured = self.steps.steps_run, self.steps.at_captured_step
        if captured:
            self.golden.end_replay()
            self.prints.take_batch(run_values.results, step, self.guard)
        self.dump.finish_step(step, self.captured_step, self.guard)
        if captured:
            golden_statistics(self.golden.target, self.dump, self.guard)  # a stats bundle's golden: statistics
            golden_of_dump_layer(self.golden.target, self.dump, self.guard, run_context.session.graph)
            self.golden.compare(self.prints.section(self.captured_step), self.facts.randomness, run_context,
                                self.guard)
        self.steps.end_run(run_context)

    def end(self, session: Any) -> None:
        with collector_paused():  # the bundle's per-file records (train/collector.py), then as it was
            self._end(session)

    def _end(self, session: Any) -> None:
        with self.guard("unmarking the dump folder {}".format(self.options.dump_path)):
            self.dump.run_ended()
        self.record = freeze(self, time.time(), read_global_step(self.facts.global_step_tensor, session))
        self.summary = self.record.summary()
        with self.guard("writing {}".format(self.layout.run_json)):
            self.record.write()
        log_summary(self)
        mismatch = self.golden.mismatch
        try:
            if mismatch is None and self.collect:
                self.bundle = self.output.write(self.record, self.steps, self.guard)
        finally:  # a failed collection (strict) must not leave DUMP_GRAPH_PATH set for the process's next run
            self.dump.end()
        if mismatch is not None:
            if self.strict:
                raise mismatch  # no bundle: the golden run is not the NPU run's (run.json says so)
            logger.error("NpuDumpHook: %s (strict=False: no golden bundle written)", printable(mismatch))
        announce(self)


def _run_args(fetches: Dict[str, Any], capture: Any, feeds: Mapping[Any, Any]) -> Any:
    """The hook's ``SessionRunArgs``: its own fetches (the batch) and the capture's, the golden
    run's replayed inputs as feeds, or None."""
    if capture is None:
        return _tf.tf_v1().train.SessionRunArgs(fetches, feed_dict=dict(feeds) or None) if fetches or feeds else None
    feed_dict = dict(capture.feed_dict or {})
    feed_dict.update(feeds)
    carry = getattr(capture.fetches, "also_fetch", None)  # the capture's one fetch carries ours: one level less
    fetched = capture.fetches if carry is not None and carry(fetches) else dict(fetches, capture=capture.fetches)
    return _tf.tf_v1().train.SessionRunArgs(fetched, feed_dict=feed_dict or None, options=capture.options)
